package app

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/server"
)

// TestStorageEncodings: core-lite's objects and the resource.draplane.dev
// ones are stored as protobuf, and a pod or a claim stored as JSON before
// is still read.
func TestStorageEncodings(t *testing.T) {
	scheme, codecs, err := server.NewScheme(true)
	if err != nil {
		t.Fatal(err)
	}
	generic, err := server.NewRecommendedConfig(codecs)
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"}
	if err := o.applyStorage(generic, scheme, codecs, nil, nil); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	tests := []struct {
		resource   schema.GroupResource
		obj        runtime.Object
		wantPrefix string
	}{
		{schema.GroupResource{Resource: "pods"}, pod, "k8s\x00"},
		{schema.GroupResource{Resource: "nodes"}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "k8s\x00"},
		{schema.GroupResource{Resource: "events"}, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}, "k8s\x00"},
		{schema.GroupResource{Group: "resource.draplane.dev", Resource: "resourceclaims"}, claim, "k8s\x00"},
	}
	for _, tc := range tests {
		t.Run(tc.resource.String(), func(t *testing.T) {
			opts, err := generic.RESTOptionsGetter.GetRESTOptions(tc.resource, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := opts.StorageConfig.Codec.Encode(tc.obj, &buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(buf.Bytes(), []byte(tc.wantPrefix)) {
				t.Errorf("stored as %q..., want the prefix %q", buf.Bytes()[:min(buf.Len(), 12)], tc.wantPrefix)
			}
		})
	}

	storedBefore := []struct {
		name     string
		resource schema.GroupResource
		obj      runtime.Object
		stored   string
	}{
		{"pod", schema.GroupResource{Resource: "pods"}, pod, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}`},
		{"claim", schema.GroupResource{Group: "resource.draplane.dev", Resource: "resourceclaims"}, claim,
			`{"kind":"ResourceClaim","apiVersion":"resource.draplane.dev/v1","metadata":{"name":"c","namespace":"ns"}}`},
	}
	for _, tc := range storedBefore {
		t.Run(tc.name+" stored as JSON before", func(t *testing.T) {
			opts, err := generic.RESTOptionsGetter.GetRESTOptions(tc.resource, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := opts.StorageConfig.Codec.Decode([]byte(tc.stored), nil, nil)
			if err != nil {
				t.Fatalf("decode a %s stored as JSON: %v", tc.name, err)
			}
			if accessor, err := meta.Accessor(got); err != nil || accessor.GetName() != tc.obj.(metav1.Object).GetName() {
				t.Errorf("decoded %#v", got)
			}
		})
	}
}
