package resource_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
)

// The wire format of every served kind is frozen in testdata:
//   - testdata/HEAD holds what the current code writes for a
//     deterministically filled object, as JSON, YAML and protobuf (.pb;
//     v0.1.0 was frozen before protobuf). A change to it is a change to the
//     wire format: review it, then rewrite the files with
//     UPDATE_COMPATIBILITY_FIXTURE_DATA=true go test ./apis/resource -run TestCompatibility
//   - when a release is cut, testdata/HEAD is copied to testdata/<release>
//     (e.g. testdata/v0.1.0) and never edited again. Those files must keep
//     decoding; what they re-encode to is pinned next to them in
//     <name>.after_roundtrip.{json,yaml} once a field is added or dropped.
const updateFixturesEnv = "UPDATE_COMPATIBILITY_FIXTURE_DATA"

// servedKinds is the list of kinds and versions we promise to keep
// readable. DeviceTaintRule is v1 only, as upstream; ResourcePoolUsage
// (resourcepools) is computed and read-only, v1 only, and not upstream.
var servedKinds = []schema.GroupVersionKind{
	{Group: resourceapi.GroupName, Version: "v1", Kind: "DeviceClass"},
	{Group: resourceapi.GroupName, Version: "v1", Kind: "DeviceTaintRule"},
	{Group: resourceapi.GroupName, Version: "v1", Kind: "ResourceClaim"},
	{Group: resourceapi.GroupName, Version: "v1", Kind: "ResourceClaimTemplate"},
	{Group: resourceapi.GroupName, Version: "v1", Kind: "ResourcePoolUsage"},
	{Group: resourceapi.GroupName, Version: "v1", Kind: "ResourceSlice"},
	{Group: resourceapi.GroupName, Version: "v1beta1", Kind: "DeviceClass"},
	{Group: resourceapi.GroupName, Version: "v1beta1", Kind: "ResourceClaim"},
	{Group: resourceapi.GroupName, Version: "v1beta1", Kind: "ResourceClaimTemplate"},
	{Group: resourceapi.GroupName, Version: "v1beta1", Kind: "ResourceSlice"},
}

type fixtureCodecs struct {
	scheme  *runtime.Scheme
	json    runtime.Serializer
	yaml    runtime.Serializer
	compact runtime.Serializer
	proto   runtime.Serializer
}

func newFixtureCodecs() fixtureCodecs {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return fixtureCodecs{
		scheme:  scheme,
		json:    json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Pretty: true}),
		yaml:    json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true}),
		compact: json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}),
		proto:   protobuf.NewSerializer(scheme, scheme),
	}
}

func fixtureName(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("%s.%s.%s", gvk.Group, gvk.Version, gvk.Kind)
}

// fillFuncs makes the deterministic filler produce values that are valid
// for types whose exported fields don't describe their wire form.
func fillFuncs() map[reflect.Type]roundtrip.FillFunc {
	return map[reflect.Type]roundtrip.FillFunc{
		reflect.TypeOf(&resource.Quantity{}): func(_ string, i int, obj any) {
			*obj.(*resource.Quantity) = *resource.NewQuantity(int64(i)+1, resource.DecimalSI)
		},
		reflect.TypeOf(&runtime.RawExtension{}): func(s string, i int, obj any) {
			obj.(*runtime.RawExtension).Raw = fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Config","value":"%s-%d"}`, s, i)
		},
		reflect.TypeOf(&metav1.TypeMeta{}): func(string, int, any) {
			// Kind and apiVersion are set by the caller.
		},
		reflect.TypeOf(&metav1.FieldsV1{}): func(s string, _ int, obj any) {
			obj.(*metav1.FieldsV1).SetRawString(fmt.Sprintf(`{"f:%s":{}}`, s))
		},
		reflect.TypeOf(&metav1.Time{}): func(_ string, i int, obj any) {
			// Whole seconds in UTC: what JSON can carry.
			*obj.(*metav1.Time) = metav1.Time{Time: time.Date(2000, 1, 1, 1, 1, i%60, 0, time.UTC)}
		},
	}
}

func encode(t *testing.T, s runtime.Serializer, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Encode(obj, &buf); err != nil {
		t.Fatalf("encode %T: %v", obj, err)
	}
	return buf.Bytes()
}

func TestCompatibility(t *testing.T) {
	c := newFixtureCodecs()
	update := os.Getenv(updateFixturesEnv) == "true"
	headDir := filepath.Join("testdata", "HEAD")

	for _, gvk := range servedKinds {
		t.Run("HEAD/"+fixtureName(gvk), func(t *testing.T) {
			expected, err := roundtrip.CompatibilityTestObject(c.scheme, gvk, fillFuncs())
			if err != nil {
				t.Fatal(err)
			}
			for format, s := range map[string]runtime.Serializer{"json": c.json, "yaml": c.yaml, "pb": c.proto} {
				want := encode(t, s, expected)
				path := filepath.Join(headDir, fixtureName(gvk)+"."+format)
				got, err := os.ReadFile(path)
				if update {
					if !bytes.Equal(got, want) {
						if err := os.MkdirAll(headDir, 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(path, want, 0o644); err != nil {
							t.Fatal(err)
						}
						t.Logf("wrote %s", path)
					}
					got = want
				} else if err != nil {
					t.Fatalf("%v (create it with %s=true)", err, updateFixturesEnv)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: the encoding of the filled object changed; if intended, rerun with %s=true:\n%s",
						path, updateFixturesEnv, cmp.Diff(string(got), string(want)))
				}
				decoded, err := c.scheme.New(gvk)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := s.Decode(got, &gvk, decoded); err != nil {
					t.Fatalf("decode %s: %v", path, err)
				}
				// Compare in compact JSON: embedded raw JSON (parameters,
				// managed fields) comes back re-indented by the pretty
				// encoders, which is the same value.
				if want, got := encode(t, c.compact, expected), encode(t, c.compact, decoded); !bytes.Equal(want, got) {
					t.Errorf("%s decodes to a different object:\n%s", path, cmp.Diff(string(want), string(got)))
				}
			}
		})
	}
}

// TestCompatibilityPreviousReleases decodes the fixtures of every frozen
// release with today's code and checks what they re-encode to.
func TestCompatibilityPreviousReleases(t *testing.T) {
	c := newFixtureCodecs()
	releases, err := filepath.Glob(filepath.Join("testdata", "v*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(releases)
	// HEAD goes through the same check, so the mechanism is exercised
	// before the first release is frozen.
	for _, dir := range append(releases, filepath.Join("testdata", "HEAD")) {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, ".after_roundtrip.json") {
				continue
			}
			checkPreviousFixture(t, c, file, c.json)
			checkPreviousFixture(t, c, strings.TrimSuffix(file, ".json")+".yaml", c.yaml)
			if pb := strings.TrimSuffix(file, ".json") + ".pb"; exists(pb) {
				checkPreviousFixture(t, c, pb, c.proto)
			}
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func checkPreviousFixture(t *testing.T, c fixtureCodecs, path string, s runtime.Serializer) {
	t.Run(path, func(t *testing.T) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		obj, gvk, err := s.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("a frozen fixture no longer decodes: %v", err)
		}
		// Through the hub and back, as the server stores and serves it.
		hub, err := c.scheme.ConvertToVersion(obj, schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal})
		if err != nil {
			t.Fatalf("convert to hub: %v", err)
		}
		back, err := c.scheme.ConvertToVersion(hub, gvk.GroupVersion())
		if err != nil {
			t.Fatalf("convert back: %v", err)
		}
		got := encode(t, s, back)
		ext := filepath.Ext(path)
		want := data
		if pinned, err := os.ReadFile(strings.TrimSuffix(path, ext) + ".after_roundtrip" + ext); err == nil {
			want = pinned
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s re-encodes differently (pin the new form in an .after_roundtrip%s file if intended):\n%s",
				path, ext, cmp.Diff(string(want), string(got)))
		}
	})
}
