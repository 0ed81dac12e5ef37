package upstreamv1_test

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

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	"github.com/draplane/draplane/apis/resource/upstreamv1"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// upstreamFixtures are k8s.io/api's own resource.k8s.io/v1 wire fixtures
// (testdata/HEAD), copied unchanged by hack/update-upstream-fixtures.sh.
// Upstream fills every field of every kind, the alpha ones included, so
// a field that a conversion loses shows as a difference here.
const upstreamFixtures = "../testdata/upstream/resource.k8s.io"

// renamedFixtures are the same fixtures with the group renamed to ours.
const renamedFixtures = "../testdata/upstream/HEAD"

// TestUpstreamFixturesThroughBothGroups decodes each upstream fixture
// strictly as resource.k8s.io/v1 (a field our scheme lacks is an error),
// converts it through the hub the server converts through, and requires:
// at resource.draplane.dev/v1, upstream's fixture renamed to our group;
// back at resource.k8s.io/v1, upstream's fixture itself.
func TestUpstreamFixturesThroughBothGroups(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	if err := upstreamv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	strict := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{Strict: true})
	files, err := filepath.Glob(filepath.Join(upstreamFixtures, "resource.k8s.io.v1.*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("%d fixtures in %s, want the 5 kinds of resource.k8s.io/v1", len(files), upstreamFixtures)
	}
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
			if gvk.GroupVersion() != upstreamv1.SchemeGroupVersion {
				t.Fatalf("decoded as %s, want %s", gvk, upstreamv1.SchemeGroupVersion)
			}
			hub, err := scheme.ConvertToVersion(external, upstreamv1.InternalGroupVersion)
			if err != nil {
				t.Fatalf("to the hub: %v", err)
			}
			renamed, err := os.ReadFile(filepath.Join(renamedFixtures, strings.Replace(filepath.Base(file), upstreamv1.GroupName, resourceapi.GroupName, 1)))
			if err != nil {
				t.Fatal(err)
			}
			for _, target := range []struct {
				gv   schema.GroupVersion
				want []byte
			}{
				{resourcev1.SchemeGroupVersion, renamed},
				{upstreamv1.SchemeGroupVersion, data},
			} {
				out, err := scheme.ConvertToVersion(hub.DeepCopyObject(), target.gv)
				if err != nil {
					t.Fatalf("to %s: %v", target.gv, err)
				}
				var encoded bytes.Buffer
				if err := strict.Encode(out, &encoded); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(decodeJSON(t, target.want), decodeJSON(t, encoded.Bytes())); diff != "" {
					t.Errorf("%s read as %s differs from the fixture (-fixture +converted):\n%s", gvk.Kind, target.gv, diff)
				}
			}
		})
	}
}

func decodeJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
