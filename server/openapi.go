package server

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/draplane/draplane/generated/openapi"
)

const gvkExtension = "x-kubernetes-group-version-kind"

// definitionNamer publishes OpenAPI definitions under REST-friendly names
// and tags each kind with the group-version-kinds it is served as, which
// kubectl explain and server-side apply look the kinds up by.
//
// Generated models are named either by an OpenAPIModelName method
// (k8s.io/api types: io.k8s.api.core.v1.Pod) or by their Go package path
// (our types: github.com/draplane/draplane/apis/resource/v1.ResourceClaim).
// apiserver's own namer only knows the first kind of name; this one
// accepts both and publishes the second as com.github.draplane....
type definitionNamer struct {
	// gvks by published name.
	gvks map[string][]schema.GroupVersionKind
	// published name by the name the generated definitions use.
	published map[string]string
}

// newDefinitionNamer indexes the kinds of scheme, which must hold only
// served (never internal) versions.
func newDefinitionNamer(scheme *runtime.Scheme) *definitionNamer {
	n := &definitionNamer{gvks: map[string][]schema.GroupVersionKind{}, published: map[string]string{}}
	for gvk, t := range scheme.AllKnownTypes() {
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			continue
		}
		n.gvks[name] = append(n.gvks[name], gvk)
		// The generated definitions may use the Go path instead.
		n.published[t.PkgPath()+"."+t.Name()] = name
		n.published[name] = name
	}
	for _, gvks := range n.gvks {
		sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	}
	return n
}

// GetDefinitionName maps a generated model name to its published name and
// group-version-kinds.
func (n *definitionNamer) GetDefinitionName(name string) (string, spec.Extensions) {
	published, ok := n.published[name]
	if !ok {
		if strings.Contains(name, "/") {
			return util.ToRESTFriendlyName(name), nil
		}
		return name, nil
	}
	gvks := n.gvks[published]
	if len(gvks) == 0 {
		return published, nil
	}
	list := make([]interface{}, 0, len(gvks))
	for _, gvk := range gvks {
		list = append(list, map[string]interface{}{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
	}
	return published, spec.Extensions{gvkExtension: list}
}

// openAPIConfigs returns the OpenAPI v2 and v3 configs, both mandatory:
// kubectl explain reads them and server-side apply derives its typed
// schemas from them.
func openAPIConfigs(scheme *runtime.Scheme) (*openapicommon.Config, *openapicommon.OpenAPIV3Config) {
	namer := newDefinitionNamer(scheme)
	v2 := genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer())
	v2.GetDefinitionName = namer.GetDefinitionName
	v2.Info.Title = "draplane"

	v3 := genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer())
	v3.GetDefinitionName = namer.GetDefinitionName
	v3.Info.Title = "draplane"
	// The default config resolved references with the namer it was given.
	v3.Definitions = openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		published, _ := namer.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + openapicommon.EscapeJsonPointer(published))
	})
	return v2, v3
}
