package server

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/kube-openapi/pkg/builder3"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/draplane/draplane/generated/openapi"
)

func TestDefinitionNamer(t *testing.T) {
	scheme, err := newOpenAPIScheme()
	if err != nil {
		t.Fatal(err)
	}
	namer := newDefinitionNamer(scheme)
	gvk := func(group, version, kind string) map[string]interface{} {
		return map[string]interface{}{"group": group, "version": version, "kind": kind}
	}
	tests := map[string]struct {
		name          string
		wantPublished string
		wantGVKs      []interface{}
	}{
		"our kind by Go path": {
			name:          "github.com/draplane/draplane/apis/resource/v1.ResourceClaim",
			wantPublished: "com.github.draplane.draplane.apis.resource.v1.ResourceClaim",
			wantGVKs:      []interface{}{gvk("resource.draplane.dev", "v1", "ResourceClaim")},
		},
		"our v1beta1 kind": {
			name:          "github.com/draplane/draplane/apis/resource/v1beta1.DeviceClass",
			wantPublished: "com.github.draplane.draplane.apis.resource.v1beta1.DeviceClass",
			wantGVKs:      []interface{}{gvk("resource.draplane.dev", "v1beta1", "DeviceClass")},
		},
		"our nested type": {
			name:          "github.com/draplane/draplane/apis/resource/v1.DeviceRequest",
			wantPublished: "com.github.draplane.draplane.apis.resource.v1.DeviceRequest",
		},
		"core kind by model name": {
			name:          "io.k8s.api.core.v1.Pod",
			wantPublished: "io.k8s.api.core.v1.Pod",
			wantGVKs:      []interface{}{gvk("", "v1", "Pod")},
		},
		"core nested type": {
			name:          "io.k8s.api.core.v1.PodSpec",
			wantPublished: "io.k8s.api.core.v1.PodSpec",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			published, extensions := namer.GetDefinitionName(tc.name)
			if published != tc.wantPublished {
				t.Errorf("published %q, want %q", published, tc.wantPublished)
			}
			var want spec.Extensions
			if tc.wantGVKs != nil {
				want = spec.Extensions{gvkExtension: tc.wantGVKs}
			}
			if diff := cmp.Diff(want, extensions); diff != "" {
				t.Errorf("extensions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestV3DefinitionsBuiltPerUse: without Definitions in the v3 config,
// builder3 builds the models the managedFields type converter is made of
// (genericapiserver's getOpenAPIModels) as it did from the definitions
// the config used to hold.
func TestV3DefinitionsBuiltPerUse(t *testing.T) {
	scheme, err := newOpenAPIScheme()
	if err != nil {
		t.Fatal(err)
	}
	_, v3 := openAPIConfigs(scheme)
	if v3.Definitions != nil {
		t.Fatal("the v3 config holds its definitions")
	}
	held := *v3
	held.Definitions = openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		published, _ := v3.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + openapicommon.EscapeJsonPointer(published))
	})
	names := slices.Sorted(maps.Keys(held.Definitions))
	got, err := builder3.BuildOpenAPIDefinitionsForResources(v3, names...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := builder3.BuildOpenAPIDefinitionsForResources(&held, names...)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(wantJSON), string(gotJSON)); diff != "" {
		t.Errorf("models (-held definitions +built per use):\n%s", diff)
	}
}
