package server

import (
	"fmt"
	"path"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// handlerInstaller installs the handlers of API groups again, after the
// generic server installed them, with typedObjectConverter as their
// field managers' type converter. The generic server builds the
// converter from the groups' OpenAPI models and gives no way to choose
// another; everything else it did at install (discovery, the destroy
// functions, the OpenAPI models) stays as it was, and the new handlers
// serve the same storage with the same admission and authorizer.
type handlerInstaller struct {
	admit               admission.Interface
	minRequestTimeout   time.Duration
	maxRequestBodyBytes int64
	// direct is given the stores the in-process informers list and
	// watch without the handlers.
	direct *directSource
}

func newHandlerInstaller(config *genericapiserver.Config) handlerInstaller {
	return handlerInstaller{
		admit:               config.AdmissionControl,
		minRequestTimeout:   time.Duration(config.MinRequestTimeout) * time.Second,
		maxRequestBodyBytes: config.MaxRequestBodyBytes,
	}
}

// install installs infos with the generic server under prefix (the
// legacy prefix takes one info), in one call, then reinstalls their
// handlers.
func (h handlerInstaller) install(s *genericapiserver.GenericAPIServer, prefix string, infos ...*genericapiserver.APIGroupInfo) error {
	if prefix == genericapiserver.DefaultLegacyAPIPrefix {
		if len(infos) != 1 {
			return fmt.Errorf("%d groups under %s, want one", len(infos), prefix)
		}
		if err := s.InstallLegacyAPIGroup(prefix, infos[0]); err != nil {
			return err
		}
	} else if err := s.InstallAPIGroups(infos...); err != nil {
		return err
	}
	if h.direct != nil {
		if err := h.direct.add(infos...); err != nil {
			return err
		}
	}
	return h.reinstall(s, prefix, infos...)
}

// reinstall replaces the web services of infos, installed together by
// one call of the generic server under prefix, with ones whose field
// managers use typedObjectConverter. It then lets go of the groups'
// OpenAPI models (forgetOpenAPIModels).
func (h handlerInstaller) reinstall(s *genericapiserver.GenericAPIServer, prefix string, infos ...*genericapiserver.APIGroupInfo) error {
	if len(infos) == 0 {
		return nil
	}
	// One InstallAPIGroups call leaves the models of all its groups in
	// each info; the converter spans them all, as the generic server's
	// does (server-side apply converts managers across their versions).
	upstream, err := managedfields.NewTypeConverter(infos[0].StaticOpenAPISpec, false)
	if err != nil {
		return fmt.Errorf("managedFields type converter: %w", err)
	}
	converter := newTypedObjectConverter(upstream)
	container := s.Handler.GoRestfulContainer
	for _, info := range infos {
		served := servedVersionsByResource(info)
		for _, groupVersion := range info.PrioritizedVersions {
			resources := info.VersionedResourcesStorageMap[groupVersion.Version]
			if len(resources) == 0 {
				continue
			}
			root := path.Join(prefix, groupVersion.Group, groupVersion.Version)
			installed := false
			for _, ws := range container.RegisteredWebServices() {
				if ws.RootPath() == root {
					if err := container.Remove(ws); err != nil {
						return fmt.Errorf("remove the handlers of %s: %w", root, err)
					}
					installed = true
					break
				}
			}
			if !installed {
				return fmt.Errorf("no handlers of %s installed", root)
			}
			// As the generic server's newAPIGroupVersion and
			// installAPIResources fill it.
			version := &genericapi.APIGroupVersion{
				Storage:                     resources,
				Root:                        prefix,
				GroupVersion:                groupVersion,
				AllServedVersionsByResource: served,
				OptionsExternalVersion:      info.OptionsExternalVersion,
				MetaGroupVersion:            info.MetaGroupVersion,
				ParameterCodec:              info.ParameterCodec,
				Serializer:                  info.NegotiatedSerializer,
				Creater:                     info.Scheme,
				Convertor:                   info.Scheme,
				ConvertabilityChecker:       info.Scheme,
				UnsafeConvertor:             runtime.UnsafeObjectConvertor(info.Scheme),
				Defaulter:                   info.Scheme,
				Typer:                       info.Scheme,
				Namer:                       runtime.Namer(meta.NewAccessor()),
				TypeConverter:               converter,
				EquivalentResourceRegistry:  s.EquivalentResourceRegistry,
				Authorizer:                  s.Authorizer,
				Admit:                       h.admit,
				MinRequestTimeout:           h.minRequestTimeout,
				MaxRequestBodyBytes:         h.maxRequestBodyBytes,
			}
			if _, _, err := version.InstallREST(container); err != nil {
				return fmt.Errorf("install the handlers of %s: %w", root, err)
			}
		}
	}
	forgetOpenAPIModels(infos...)
	return nil
}

// servedVersionsByResource lists, per resource, the group versions info
// serves it in, as the generic server's newAPIGroupVersion does.
func servedVersionsByResource(info *genericapiserver.APIGroupInfo) map[string][]string {
	served := map[string][]string{}
	for version, resources := range info.VersionedResourcesStorageMap {
		for resource := range resources {
			if group := info.PrioritizedVersions[0].Group; group != "" {
				served[resource] = append(served[resource], group+"/"+version)
			} else {
				served[resource] = append(served[resource], version)
			}
		}
	}
	return served
}
