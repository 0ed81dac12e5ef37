package server

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	restful "github.com/emicklei/go-restful/v3"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
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
//
// The v3 config keeps no Definitions: builder3 then calls GetDefinitions
// for each document it builds, with the same reference function
// (#/components/schemas/ and the published name), so nothing holds the
// whole set of generated definitions between builds, and builds of
// different group-versions (installOpenAPI runs them on first request,
// possibly concurrently) share no schema maps that builder3 writes the
// group-version-kinds into.
func openAPIConfigs(scheme *runtime.Scheme) (*openapicommon.Config, *openapicommon.OpenAPIV3Config) {
	namer := newDefinitionNamer(scheme)
	v2 := genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer())
	v2.GetDefinitionName = namer.GetDefinitionName
	v2.Info.Title = "draplane"

	v3 := genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, openapinamer.NewDefinitionNamer())
	v3.GetDefinitionName = namer.GetDefinitionName
	v3.Info.Title = "draplane"
	// The default config resolved references with the namer it was given.
	v3.Definitions = nil
	return v2, v3
}

// installOpenAPI serves /openapi/v2, /openapi/v3 and /openapi/v3/<group-version>
// as genericapiserver's PrepareRun does (routes.OpenAPI InstallV2 and
// InstallV3), except that each document is built on its first request
// instead of at start: built, they hold several megabytes that a server
// nobody asks for its OpenAPI would keep for its life. The generic server
// must be configured with SkipOpenAPIInstallation and have all its API
// groups installed.
//
// A document that fails to build answers 500 (and, for a group-version,
// also the /openapi/v3 index, whose entries carry each document's hash)
// where PrepareRun exits (v2) or leaves the group-version out (v3).
func installOpenAPI(s *genericapiserver.GenericAPIServer, v2 *openapicommon.Config, v3 *openapicommon.OpenAPIV3Config) error {
	container, mux := s.Handler.GoRestfulContainer, s.Handler.NonGoRestfulMux
	webServices := slices.Clone(container.RegisteredWebServices())

	s.OpenAPIVersionedService = handler.NewOpenAPIServiceLazy(buildOnce(func() (*spec.Swagger, error) {
		swagger, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(webServices), v2)
		if err != nil {
			return nil, fmt.Errorf("build OpenAPI v2: %w", err)
		}
		swagger.Definitions = handler.PruneDefaults(swagger.Definitions)
		return swagger, nil
	}))
	s.OpenAPIVersionedService.RegisterOpenAPIVersionedService("/openapi/v2", mux)

	s.OpenAPIV3VersionedService = handler3.NewOpenAPIService()
	if err := s.OpenAPIV3VersionedService.RegisterOpenAPIV3VersionedService("/openapi/v3", mux); err != nil {
		return fmt.Errorf("register /openapi/v3: %w", err)
	}
	// One document per root path; of web services sharing one, the last
	// registered is the one documented, as in InstallV3.
	grouped := map[string]*restful.WebService{}
	for _, ws := range webServices {
		grouped[strings.TrimPrefix(ws.RootPath(), "/")] = ws
	}
	for gv, ws := range grouped {
		s.OpenAPIV3VersionedService.UpdateGroupVersionLazy(gv, buildOnce(func() (*spec3.OpenAPI, error) {
			doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), v3)
			if err != nil {
				return nil, fmt.Errorf("build OpenAPI v3 of %s: %w", gv, err)
			}
			if group, version, ok := groupVersionOfPath(gv); ok {
				scopeMetaKinds(doc, group, version)
			}
			return doc, nil
		}))
	}
	return nil
}

// buildOnce calls build on the first Get and keeps its result, an error
// included (logged once).
func buildOnce[T any](build func() (T, error)) cached.Value[T] {
	return cached.Once(cached.Func(func() (T, string, error) {
		v, err := build()
		if err != nil {
			klog.Background().Error(err, "Serving no OpenAPI document")
		}
		// The document never changes: any constant tag will do (the
		// handlers tag what they serve with a hash of the bytes).
		return v, "built", err
	}))
}

// groupVersionOfPath returns the group and version a root path such as
// "api/v1" or "apis/resource.draplane.dev/v1" serves.
func groupVersionOfPath(path string) (group, version string, ok bool) {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return "", parts[1], true
	case len(parts) == 3 && parts[0] == "apis":
		return parts[1], parts[2], true
	}
	return "", "", false
}

// scopeMetaKinds is what InstallV3 does to each group-version's document
// (routes.filterScopedGVKs, not exported): the kinds that
// metav1.AddToGroupVersion registers in every group (WatchEvent,
// DeleteOptions) keep, of their group-version-kinds, only this
// group-version's and core v1's.
func scopeMetaKinds(doc *spec3.OpenAPI, group, version string) {
	if doc == nil || doc.Components == nil {
		return
	}
	for _, schema := range doc.Components.Schemas {
		if schema == nil {
			continue
		}
		gvks, ok := schema.Extensions[gvkExtension].([]interface{})
		if !ok || len(gvks) <= 1 {
			continue
		}
		first, _ := gvks[0].(map[string]interface{})
		if kind, _ := first["kind"].(string); !metaKinds[kind] {
			continue
		}
		var kept []interface{}
		for _, item := range gvks {
			gvk, _ := item.(map[string]interface{})
			g, gok := gvk["group"].(string)
			v, vok := gvk["version"].(string)
			if gok && vok && (g == group && v == version || g == "" && v == "v1") {
				kept = append(kept, item)
			}
		}
		if len(kept) == 0 {
			delete(schema.Extensions, gvkExtension)
			continue
		}
		schema.Extensions[gvkExtension] = kept
	}
}

// metaKinds are the kinds metav1.AddToGroupVersion registers in every group.
var metaKinds = map[string]bool{"WatchEvent": true, "DeleteOptions": true}
