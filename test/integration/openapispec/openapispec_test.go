// Package openapispec keeps api/openapi-spec/HEAD equal to what the server
// serves: the OpenAPI v3 document of every group-version of
// resource.draplane.dev and of resource.k8s.io/v1, and served.json (the served kinds and their
// lifecycle). hack/verify-api-compat.sh compares these files with the
// newest frozen release; hack/freeze-release.sh copies them to
// api/openapi-spec/<release>.
//
// Rewrite them after an intended API change with `make update-openapi-spec`.
package openapispec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	"github.com/draplane/draplane/apis/resource/upstreamv1"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/integration/framework"
)

const updateEnv = "UPDATE_OPENAPI_SPEC"

// servedFile names the record of the served kinds and their lifecycle,
// next to the OpenAPI documents.
const servedFile = "served.json"

// servedKind is one kind of a served group-version as recorded in
// served.json. The lifecycle fields are empty for a version that is not
// deprecated.
type servedKind struct {
	Resource    string `json:"resource"`
	Introduced  string `json:"introduced,omitempty"`
	Deprecated  string `json:"deprecated,omitempty"`
	Removed     string `json:"removed,omitempty"`
	Replacement string `json:"replacement,omitempty"`
}

func TestOpenAPISpec(t *testing.T) {
	headDir := filepath.Join(testenv.RepoRoot(), "api", "openapi-spec", "HEAD")

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	config := framework.StartServer(ctx, t, &wg, false)
	client := kubernetes.NewForConfigOrDie(config).Discovery().RESTClient()

	// The index of the OpenAPI v3 documents: one per group-version.
	raw, err := client.Get().AbsPath("/openapi/v3").DoRaw(ctx)
	if err != nil {
		t.Fatalf("get /openapi/v3: %v", err)
	}
	var index struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	served := map[string]map[string]servedKind{}
	// Our group, and upstream's resource.k8s.io as standalone serves it
	// over the same objects (hack/verify-api-compat.sh also compares that
	// one with what Kubernetes itself serves).
	prefixes := []string{"apis/" + resourceapi.GroupName + "/", "apis/" + upstreamv1.GroupName + "/"}
	for path := range index.Paths {
		if !slices.ContainsFunc(prefixes, func(prefix string) bool { return strings.HasPrefix(path, prefix) }) {
			// Core-lite's documents are k8s.io/api's schemas, which
			// upstream Kubernetes evolves under its own policy; and
			// they are not served in aggregated mode.
			continue
		}
		doc, err := client.Get().AbsPath("/openapi/v3/" + path).DoRaw(ctx)
		if err != nil {
			t.Fatalf("get %s: %v", path, err)
		}
		normalized, err := normalize(doc)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want[documentName(path)] = normalized

		served[strings.TrimPrefix(path, "apis/")] = servedKinds(ctx, t, client, "/"+path)
	}
	if len(served) < 3 {
		t.Fatalf("found %d group-versions under /openapi/v3 (%v), want %s v1 and v1beta1 and %s", len(served), slices.Sorted(maps.Keys(served)), resourceapi.GroupName, upstreamv1.SchemeGroupVersion)
	}
	record, err := json.MarshalIndent(served, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want[servedFile] = append(record, '\n')

	if os.Getenv(updateEnv) == "true" {
		if err := os.RemoveAll(headDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(headDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range want {
			if err := os.WriteFile(filepath.Join(headDir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", filepath.Join(headDir, name))
		}
		return
	}

	entries, err := os.ReadDir(headDir)
	if err != nil {
		t.Fatalf("%v (create the files with `make update-openapi-spec`)", err)
	}
	for _, entry := range entries {
		if _, ok := want[entry.Name()]; !ok {
			t.Errorf("%s is no longer served; run `make update-openapi-spec`", filepath.Join(headDir, entry.Name()))
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(headDir, name))
		if err != nil {
			t.Errorf("%v; run `make update-openapi-spec`", err)
			continue
		}
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s differs from what the server serves; if the API change is intended, run `make update-openapi-spec` (and `make verify-api-compat`):\n%s",
				filepath.Join(headDir, name), cmp.Diff(string(got), string(want[name])))
		}
	}
}

// documentName is the file a group-version's document is kept in, named
// as upstream Kubernetes names them in its api/openapi-spec/v3.
func documentName(path string) string {
	return strings.ReplaceAll(path, "/", "__") + "_openapi.json"
}

// normalize re-encodes a document with sorted keys and a fixed indent, so
// that the committed files are stable and diff well.
func normalize(doc []byte) ([]byte, error) {
	decoder := json.NewDecoder(bytes.NewReader(doc))
	decoder.UseNumber()
	var v any
	if err := decoder.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// servedKinds lists the kinds a group-version serves (from discovery) with
// the lifecycle their Go types declare, and checks that the server warns
// on a request to every deprecated one and on no other.
func servedKinds(ctx context.Context, t *testing.T, client rest.Interface, path string) map[string]servedKind {
	t.Helper()
	raw, err := client.Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		t.Fatalf("discovery %s: %v", path, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	gv, err := schema.ParseGroupVersion(list.GroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	scheme := k8sruntime.NewScheme()
	install.Install(scheme)
	if err := upstreamv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}

	kinds := map[string]servedKind{}
	for _, resource := range list.APIResources {
		if strings.Contains(resource.Name, "/") {
			continue
		}
		obj, err := scheme.New(gv.WithKind(resource.Kind))
		if err != nil {
			t.Fatalf("%s %s: %v", path, resource.Kind, err)
		}
		kind := servedKind{Resource: resource.Name}
		if l, ok := obj.(interface{ APILifecycleIntroduced() (int, int) }); ok {
			kind.Introduced = majorMinor(l.APILifecycleIntroduced())
		}
		if l, ok := obj.(interface{ APILifecycleDeprecated() (int, int) }); ok {
			kind.Deprecated = majorMinor(l.APILifecycleDeprecated())
		}
		if l, ok := obj.(interface{ APILifecycleRemoved() (int, int) }); ok {
			kind.Removed = majorMinor(l.APILifecycleRemoved())
		}
		if l, ok := obj.(interface {
			APILifecycleReplacement() schema.GroupVersionKind
		}); ok {
			gvk := l.APILifecycleReplacement()
			kind.Replacement = gvk.GroupVersion().String() + " " + gvk.Kind
		}
		kinds[resource.Kind] = kind

		// What a client sees: a Warning header exactly on deprecated kinds.
		result := client.Get().AbsPath(path, resource.Name).Do(ctx)
		if err := result.Error(); err != nil {
			t.Fatalf("list %s/%s: %v", path, resource.Name, err)
		}
		var warnings []string
		for _, w := range result.Warnings() {
			warnings = append(warnings, fmt.Sprintf("%d %s", w.Code, w.Text))
		}
		warned := len(warnings) == 1 && strings.HasPrefix(warnings[0], "299 ") && strings.Contains(warnings[0], " is deprecated in v"+kind.Deprecated+"+")
		switch {
		case kind.Deprecated != "" && !warned:
			t.Errorf("GET %s/%s: want one deprecation warning, got %q", path, resource.Name, warnings)
		case kind.Deprecated == "" && len(warnings) > 0:
			t.Errorf("GET %s/%s: want no warning, got %q", path, resource.Name, warnings)
		}
	}
	return kinds
}

func majorMinor(major, minor int) string { return fmt.Sprintf("%d.%d", major, minor) }
