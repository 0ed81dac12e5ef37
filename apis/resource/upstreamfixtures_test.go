package resource_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	"github.com/draplane/draplane/internal/features"
)

// upstreamFixtures holds upstream's own wire fixtures of resource.k8s.io
// v1 and v1beta1 (k8s.io/api testdata/HEAD): JSON with the group renamed,
// protobuf as upstream wrote it; hack/update-upstream-fixtures.sh
// refreshes them. Upstream fills every field, the alpha ones included.
const upstreamFixtures = "testdata/upstream/HEAD"

// alphaGates are the gates of the fields that are alpha upstream. The
// codec does not look at gates (the registry strategies do), but the
// fixtures are decoded the way a server with every gate on would.
var alphaGates = []featuregate.Feature{
	features.DRAPartitionableDevicesType, features.DRAOptionalNodeOperations,
	features.DRANodeAllocatableResources, features.DRADeviceCompatibilityGroups,
	features.DRAListTypeAttributes, features.DRADerivedAttributes,
}

// upstreamFixtureFiles turns every alpha gate on for the test and returns
// a scheme with our group, a strict JSON serializer for it and the nine
// upstream fixtures with the extension ext.
func upstreamFixtureFiles(t *testing.T, ext string) (*runtime.Scheme, runtime.Serializer, []string) {
	t.Helper()
	for _, gate := range alphaGates {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, gate, true)
	}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	strict := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{Strict: true})
	files, err := filepath.Glob(filepath.Join(upstreamFixtures, "*."+ext))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 9 {
		t.Fatalf("%d upstream .%s fixtures in %s, want 9 (v1: 5 kinds, v1beta1: 4)", len(files), ext, upstreamFixtures)
	}
	return scheme, strict, files
}

// TestUpstreamFixtures decodes every upstream fixture strictly (a field
// our types lack is an error) into the served version, converts it to
// the internal version and back, encodes it again and requires the same
// JSON document.
func TestUpstreamFixtures(t *testing.T) {
	scheme, strict, files := upstreamFixtureFiles(t, "json")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			external, gvk, err := strict.Decode(data, nil, nil)
			if err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			if gvk.Group != resourceapi.GroupName {
				t.Fatalf("group %q, want %q", gvk.Group, resourceapi.GroupName)
			}
			internal, err := scheme.ConvertToVersion(external, schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal})
			if err != nil {
				t.Fatalf("to internal: %v", err)
			}
			back, err := scheme.ConvertToVersion(internal, gvk.GroupVersion())
			if err != nil {
				t.Fatalf("back to %s: %v", gvk.GroupVersion(), err)
			}
			var encoded strings.Builder
			if err := strict.Encode(back, &encoded); err != nil {
				t.Fatal(err)
			}
			var want, got map[string]any
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(encoded.String()), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("re-encoded %s differs (-upstream +ours):\n%s", gvk, diff)
			}
		})
	}
}

// TestUpstreamProtobufFixtures decodes the message inside each upstream
// protobuf fixture with our types' protobuf code and requires the object
// its JSON twin decodes to: our field numbers are upstream's.
func TestUpstreamProtobufFixtures(t *testing.T) {
	scheme, strict, files := upstreamFixtureFiles(t, "pb")
	compact := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{})
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var envelope runtime.Unknown
			if err := envelope.Unmarshal(bytes.TrimPrefix(data, []byte("k8s\x00"))); err != nil {
				t.Fatalf("envelope: %v", err)
			}
			twin, err := os.ReadFile(strings.TrimSuffix(file, ".pb") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			want, gvk, err := strict.Decode(twin, nil, nil)
			if err != nil {
				t.Fatalf("strict decode of the JSON twin: %v", err)
			}
			if upstreamGV := "resource.k8s.io/" + gvk.Version; envelope.APIVersion != upstreamGV || envelope.Kind != gvk.Kind {
				t.Fatalf("envelope holds %s %s, want %s %s", envelope.APIVersion, envelope.Kind, upstreamGV, gvk.Kind)
			}
			obj, err := scheme.New(*gvk)
			if err != nil {
				t.Fatal(err)
			}
			message, ok := obj.(interface{ Unmarshal([]byte) error })
			if !ok {
				t.Fatalf("%T has no protobuf encoding", obj)
			}
			if err := message.Unmarshal(envelope.Raw); err != nil {
				t.Fatalf("decode: %v", err)
			}
			obj.GetObjectKind().SetGroupVersionKind(*gvk)
			var wantJSON, gotJSON bytes.Buffer
			if err := compact.Encode(want, &wantJSON); err != nil {
				t.Fatal(err)
			}
			if err := compact.Encode(obj, &gotJSON); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantJSON.String(), gotJSON.String()); diff != "" {
				t.Errorf("%s decodes to another object than its JSON twin (-json +protobuf):\n%s", filepath.Base(file), diff)
			}
		})
	}
}
