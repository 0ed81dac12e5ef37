package resource_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	"github.com/draplane/draplane/apis/resource/v1beta1"
	"github.com/draplane/draplane/apis/resource/validation"
)

// The fuzz targets below run their seeds in every `go test`; `make fuzz`
// runs each with -fuzz for longer. Seeds are the frozen wire fixtures of
// every kind and version (testdata/HEAD) plus the corpus in
// testdata/fuzz/<target>.

var fuzzScheme, fuzzCodecs = func() (*runtime.Scheme, serializer.CodecFactory) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return scheme, serializer.NewCodecFactory(scheme)
}()

func addFixtureSeeds(f *testing.F) {
	var files []string
	for _, ext := range []string{"json", "yaml"} {
		matches, err := filepath.Glob(filepath.Join("testdata", "HEAD", "*."+ext))
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, matches...)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"resource.draplane.dev/v1beta1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},"spec":{"devices":{"requests":[{"name":"r","deviceClassName":"c","firstAvailable":[{"name":"a","deviceClassName":"c"}]}]}}}`))
	f.Add([]byte(`{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d.example.com","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,"devices":[{"name":"x","attributes":{"a":{"int":1}}}]}}`))
}

// decodeToHub decodes any of our kinds, JSON or YAML, into the hub with
// defaulting, as the server does for a request body.
func decodeToHub(data []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	return fuzzCodecs.UniversalDecoder(resourceapi.SchemeGroupVersion).Decode(data, nil, nil)
}

// FuzzDecode: whatever decodes from JSON or YAML (protobuf inputs: see
// TestDecodeStableProtobuf) must encode in its own version, and that
// encoding must decode and encode again to the same bytes, or to the same
// JSON values where they differ (see sameJSON); nothing panics.
func FuzzDecode(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(checkDecodeStable)
}

// TestDecodeStableProtobuf runs FuzzDecode's check on the protobuf
// fixtures and on protobuf inputs that once failed it. They are not fuzz
// seeds: mutated protobuf reaches values no JSON document can carry, which
// the whole apimachinery stack shares (a metav1.Time beyond year 9999
// encodes to JSON that does not parse back), so the property FuzzDecode
// checks holds for JSON and YAML input only.
func TestDecodeStableProtobuf(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "HEAD", "*.pb"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join("testdata", "protobuf", "*.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 || len(more) == 0 {
		t.Fatalf("no protobuf inputs: %d fixtures, %d found by fuzzing", len(files), len(more))
	}
	for _, file := range append(files, more...) {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			checkDecodeStable(t, data)
		})
	}
}

// checkDecodeStable is FuzzDecode's check of one input.
func checkDecodeStable(t *testing.T, data []byte) {
	obj, gvk, err := fuzzCodecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return
	}
	encoder := fuzzCodecs.LegacyCodec(gvk.GroupVersion())
	var first bytes.Buffer
	if err := encoder.Encode(obj, &first); err != nil {
		// An object that decodes but can't be encoded would be lost
		// if it were stored. Protobuf carries raw fields as bytes that
		// need not be JSON; the server never stores those (see
		// neverStored).
		if neverStored(obj, encoder) {
			return
		}
		t.Fatalf("decoded %v but cannot encode it, and validation takes it: %v", gvk, err)
	}
	again, _, err := fuzzCodecs.UniversalDeserializer().Decode(first.Bytes(), nil, nil)
	if err != nil {
		t.Fatalf("re-decode of our own encoding failed: %v\n%s", err, first.String())
	}
	var second bytes.Buffer
	if err := encoder.Encode(again, &second); err != nil {
		t.Fatalf("encode after re-decode: %v", err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) && !sameJSON(t, first.Bytes(), second.Bytes()) {
		t.Fatalf("encode/decode is not stable:\nfirst:  %s\nsecond: %s", first.String(), second.String())
	}
}

// neverStored says whether the server would refuse obj, or store it only
// without what has no JSON form: ResourcePoolUsage is computed and never
// written; managedFields whose fieldsV1 do not decode are replaced by the
// field manager on every write (by the live object's, or new ones); and
// validation refuses opaque parameters that are not a JSON object.
func neverStored(obj runtime.Object, encoder runtime.Encoder) bool {
	if obj.GetObjectKind().GroupVersionKind().Kind == "ResourcePoolUsage" {
		return true
	}
	if refusedOnCreate(obj) {
		return true
	}
	stripped := obj.DeepCopyObject()
	accessor, err := meta.Accessor(stripped)
	if err != nil || len(accessor.GetManagedFields()) == 0 {
		return false
	}
	accessor.SetManagedFields(nil)
	var buf bytes.Buffer
	return encoder.Encode(stripped, &buf) == nil
}

// refusedOnCreate says whether validation refuses obj (of any served
// version, defaulted as the server defaults a request) on create.
func refusedOnCreate(obj runtime.Object) bool {
	obj = obj.DeepCopyObject()
	fuzzScheme.Default(obj)
	hub, err := fuzzScheme.ConvertToVersion(obj, resourceapi.SchemeGroupVersion)
	if err != nil {
		return true
	}
	switch o := hub.(type) {
	case *resourceapi.DeviceClass:
		return len(validation.ValidateDeviceClass(o)) > 0
	case *resourceapi.ResourceClaim:
		return len(validation.ValidateResourceClaim(o)) > 0
	case *resourceapi.ResourceClaimTemplate:
		return len(validation.ValidateResourceClaimTemplate(o)) > 0
	case *resourceapi.ResourceSlice:
		return len(validation.ValidateResourceSlice(o)) > 0
	case *resourceapi.DeviceTaintRule:
		return len(validation.ValidateDeviceTaintRule(o)) > 0
	}
	return false
}

// sameJSON says whether two JSON documents hold the same values. A string
// decoded from protobuf may hold bytes that are not UTF-8: the first JSON
// encoding writes each as the escape \ufffd, the second the character
// itself, which is the same string.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("our own encoding is not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("our own encoding is not JSON: %v\n%s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

// FuzzValidate: validation never panics on any decodable object, create
// and update alike.
func FuzzValidate(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := decodeToHub(data)
		if err != nil {
			return
		}
		switch o := obj.(type) {
		case *resourceapi.DeviceClass:
			_ = validation.ValidateDeviceClass(o)
			_ = validation.ValidateDeviceClassUpdate(o, o.DeepCopy())
		case *resourceapi.ResourceClaim:
			_ = validation.ValidateResourceClaim(o)
			_ = validation.ValidateResourceClaimUpdate(o, o.DeepCopy())
			_ = validation.ValidateResourceClaimStatusUpdate(o, &resourceapi.ResourceClaim{ObjectMeta: o.ObjectMeta, Spec: o.Spec})
		case *resourceapi.ResourceClaimTemplate:
			_ = validation.ValidateResourceClaimTemplate(o)
			_ = validation.ValidateResourceClaimTemplateUpdate(o, o.DeepCopy())
		case *resourceapi.ResourceSlice:
			_ = validation.ValidateResourceSlice(o)
			_ = validation.ValidateResourceSliceUpdate(o, o.DeepCopy())
		case *resourceapi.DeviceTaintRule:
			_ = validation.ValidateDeviceTaintRule(o)
			_ = validation.ValidateDeviceTaintRuleUpdate(o, o.DeepCopy())
			_ = validation.ValidateDeviceTaintRuleStatusUpdate(o, o.DeepCopy())
		}
	})
}

// FuzzV1beta1Conversion: a v1beta1 object converted to the hub, back to
// v1beta1 and to the hub again gives the same hub object: the hand-written
// conversion loses nothing the hub can hold.
func FuzzV1beta1Conversion(f *testing.F) {
	addFixtureSeeds(f)
	betaGV := v1beta1.SchemeGroupVersion
	hubGV := resourceapi.SchemeGroupVersion
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, gvk, err := fuzzCodecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil || gvk.GroupVersion() != betaGV {
			return
		}
		hub, err := fuzzScheme.ConvertToVersion(obj, hubGV)
		if err != nil {
			t.Fatalf("v1beta1 -> hub: %v", err)
		}
		beta, err := fuzzScheme.ConvertToVersion(hub.DeepCopyObject(), betaGV)
		if err != nil {
			t.Fatalf("hub -> v1beta1: %v", err)
		}
		hubAgain, err := fuzzScheme.ConvertToVersion(beta, hubGV)
		if err != nil {
			t.Fatalf("v1beta1 -> hub again: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(hub, hubAgain) {
			t.Fatalf("conversion is not stable:\nfirst:  %#v\nsecond: %#v", hub, hubAgain)
		}
	})
}
