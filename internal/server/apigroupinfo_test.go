package server

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/draplane/draplane/internal/codec"
)

// TestAPIGroupInfoCodecs: the API groups' JSON serializers, plain, strict
// and streaming, find kinds with typeMetaFactory; YAML's and protobuf's
// are the default ones.
func TestAPIGroupInfoCodecs(t *testing.T) {
	scheme, codecs, err := NewScheme(true)
	if err != nil {
		t.Fatal(err)
	}
	for name, ns := range map[string]runtime.NegotiatedSerializer{
		"API group": newAPIGroupInfo("", scheme, codecs).NegotiatedSerializer,
		"storage":   codec.WithTypeMetaFactory(scheme, codecs, false),
	} {
		for _, info := range ns.SupportedMediaTypes() {
			want := map[string]string{
				"application/json":                    "codec.typeMetaFactory",
				"application/yaml":                    "json.SimpleMetaFactory",
				"application/vnd.kubernetes.protobuf": "",
			}[info.MediaType]
			serializers := map[string]runtime.Decoder{"plain": info.Serializer, "strict": info.StrictSerializer}
			if info.StreamSerializer != nil {
				serializers["stream"] = info.StreamSerializer.Serializer
			}
			for kind, s := range serializers {
				if got := metaFactoryOf(s); got != want {
					t.Errorf("%s, %s, %s serializer: meta factory %q, want %q", name, info.MediaType, kind, got, want)
				}
			}
		}
	}
}

// metaFactoryOf is the type of a JSON serializer's meta factory, or ""
// for other serializers.
func metaFactoryOf(d runtime.Decoder) string {
	v := reflect.ValueOf(d)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	meta := v.Elem().FieldByName("meta")
	if !meta.IsValid() || meta.IsNil() {
		return ""
	}
	return meta.Elem().Type().String()
}
