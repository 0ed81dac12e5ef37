package server

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/deprecation"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	baseversion "k8s.io/component-base/version"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/capacity"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/upstreamv1"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/registry/deviceclass"
	"github.com/draplane/draplane/internal/registry/devicetaintrule"
	"github.com/draplane/draplane/internal/registry/resourceclaim"
	"github.com/draplane/draplane/internal/registry/resourceclaimtemplate"
	"github.com/draplane/draplane/internal/registry/resourcepool"
	"github.com/draplane/draplane/internal/registry/resourceslice"
)

// resourceStorage returns the storage of every resource of
// resource.draplane.dev, keyed as the API paths name them. The stores of
// resourceslices and resourceclaims/status run nodeRestriction's checks of
// updates (nil: none); the admission chain has it for creates and
// deletes.
func resourceStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, adminAccess resourceclaim.AdminAccess, pools *resourcepool.REST, nodeRestriction *node.Admission) (map[string]rest.Storage, error) {
	var sliceCheck, claimStatusCheck rest.ValidateObjectUpdateFunc
	if nodeRestriction != nil {
		sliceCheck = nodeRestriction.UpdateCheck(resourcev1.SchemeGroupVersion.WithResource("resourceslices"), "")
		claimStatusCheck = nodeRestriction.UpdateCheck(resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), "status")
	}
	classes, err := deviceclass.NewREST(scheme, optsGetter)
	if err != nil {
		return nil, err
	}
	claims, claimStatus, err := resourceclaim.NewREST(scheme, optsGetter, adminAccess, claimStatusCheck)
	if err != nil {
		return nil, err
	}
	templates, err := resourceclaimtemplate.NewREST(scheme, optsGetter, adminAccess)
	if err != nil {
		return nil, err
	}
	slices, err := resourceslice.NewREST(scheme, optsGetter, sliceCheck)
	if err != nil {
		return nil, err
	}
	rules, ruleStatus, err := devicetaintrule.NewREST(scheme, optsGetter)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"deviceclasses":           classes,
		"resourceclaims":          claims,
		"resourceclaims/status":   claimStatus,
		"resourceclaimtemplates":  templates,
		"resourceslices":          slices,
		"devicetaintrules":        rules,
		"devicetaintrules/status": ruleStatus,
		"resourcepools":           pools,
	}, nil
}

// servedIn returns the storage whose kinds exist in version gv (v1beta1
// has no DeviceTaintRule and no ResourcePool) and are still served by this binary: a kind
// whose lifecycle names a removal release (prerelease-lifecycle-gen's
// APILifecycleRemoved) is left out from that release on. expiration is
// nil when the binary carries no version (built without -ldflags): then
// every kind is served.
func servedIn(scheme *runtime.Scheme, gv schema.GroupVersion, storage map[string]rest.Storage, expiration genericapiserver.ResourceExpirationEvaluator) map[string]rest.Storage {
	served := map[string]rest.Storage{}
	for path, s := range storage {
		kinds, _, err := scheme.ObjectKinds(s.New())
		if err != nil || len(kinds) == 0 || !scheme.Recognizes(gv.WithKind(kinds[0].Kind)) {
			continue
		}
		if expiration != nil {
			obj, err := scheme.New(gv.WithKind(kinds[0].Kind))
			if err != nil {
				continue
			}
			if removed, ok := obj.(interface{ APILifecycleRemoved() (int, int) }); ok {
				if major, minor := removed.APILifecycleRemoved(); !expiration.ShouldServeForVersion(major, minor) {
					continue
				}
			}
		}
		served[path] = s
	}
	return served
}

// expirationEvaluator decides by the binary's version (the component-base
// version variables, 0.<minor> in our builds) which deprecated kinds are
// past their removal release. It returns nil for a binary without a
// version.
func expirationEvaluator(info version.Info) (genericapiserver.ResourceExpirationEvaluator, error) {
	major, minor, err := deprecation.MajorMinor(info)
	if err != nil {
		return nil, nil
	}
	var prerelease string
	if v, err := utilversion.ParseSemantic(info.GitVersion); err == nil {
		prerelease = v.PreRelease()
	}
	return genericapiserver.NewResourceExpirationEvaluatorFromOptions(genericapiserver.ResourceExpirationEvaluatorOptions{
		CurrentVersion: utilversion.MajorMinor(uint(major), uint(minor)),
		Prerelease:     prerelease,
	})
}

// installResourceAPI serves resource.draplane.dev v1 and v1beta1 and, with
// upstream set, resource.k8s.io v1. Every version of both groups shares
// one storage (and one watch cache) per resource: objects are stored as
// resource.draplane.dev/v1 and converted on the way in and out, through
// the internal types both groups' versions convert to. resourcepools
// (resource.draplane.dev/v1 only) are computed from the other resources,
// through the process's shared informers on the in-process loopback
// client (served by inProcess) once the server serves; this hook owns
// them and shuts them down when the server stops.
func installResourceAPI(s *genericapiserver.GenericAPIServer, handlers handlerInstaller, scheme *runtime.Scheme, codecs serializer.CodecFactory, optsGetter generic.RESTOptionsGetter,
	adminAccess resourceclaim.AdminAccess, nodeRestriction *node.Admission, inProcess *InProcess, upstream bool) (*resourcepool.REST, error) {
	pools := resourcepool.NewREST(capacity.New(allocator.New(allocator.Options{})))
	pools.RegisterMetrics()
	if err := s.AddPostStartHook("start-resourcepools", func(hook genericapiserver.PostStartHookContext) error {
		informers, err := inProcess.Informers(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		go func() {
			<-hook.Done()
			informers.Shutdown()
		}()
		return pools.Start(hook.Context, informers.Resource)
	}); err != nil {
		return nil, err
	}
	storage, err := resourceStorage(scheme, optsGetter, adminAccess, pools, nodeRestriction)
	if err != nil {
		return nil, fmt.Errorf("storage for %s: %w", resourceapi.GroupName, err)
	}
	expiration, err := expirationEvaluator(baseversion.Get())
	if err != nil {
		return nil, err
	}
	info := newAPIGroupInfo(resourceapi.GroupName, scheme, codecs)
	info.VersionedResourcesStorageMap[resourcev1.SchemeGroupVersion.Version] = storage
	if beta := servedIn(scheme, resourcev1beta1.SchemeGroupVersion, storage, expiration); len(beta) > 0 {
		info.VersionedResourcesStorageMap[resourcev1beta1.SchemeGroupVersion.Version] = beta
	}
	infos := []*genericapiserver.APIGroupInfo{&info}
	if upstream {
		// The same storage objects, not new ones: one store and one watch
		// cache per resource for both groups. Listed after our group, so
		// that discovery lists ours first and kubectl picks it for a
		// resource named without its group.
		upstreamInfo := newAPIGroupInfo(upstreamv1.GroupName, scheme, codecs)
		upstreamInfo.VersionedResourcesStorageMap[upstreamv1.SchemeGroupVersion.Version] = servedIn(scheme, upstreamv1.SchemeGroupVersion, storage, expiration)
		infos = append(infos, &upstreamInfo)
	}
	// In one call: server-side apply converts managed fields between the
	// versions of the groups installed together only (it builds its
	// schemas from their OpenAPI models). Installed apart, an apply
	// through one group silently drops the other group's managers.
	if err := handlers.install(s, genericapiserver.APIGroupPrefix, infos...); err != nil {
		return nil, fmt.Errorf("install %s: %w", resourceapi.GroupName, err)
	}
	// kubectl resolves a resource named without its group (`kubectl get
	// resourceclaims`) to the first group of discovery that has it.
	// Aggregated discovery orders groups by priority, then by name; ours
	// gets a higher priority than the default every other group has, so
	// that it comes first whatever the names.
	if upstream && s.AggregatedDiscoveryGroupManager != nil {
		for i, version := range []string{resourcev1.SchemeGroupVersion.Version, resourcev1beta1.SchemeGroupVersion.Version} {
			if _, served := info.VersionedResourcesStorageMap[version]; served {
				s.AggregatedDiscoveryGroupManager.SetGroupVersionPriority(metav1.GroupVersion{Group: resourceapi.GroupName, Version: version}, preferredGroupPriority, 15-i)
			}
		}
	}
	return pools, nil
}

// preferredGroupPriority is resource.draplane.dev's priority in aggregated
// discovery, above the default of 1000 of the generic API server.
const preferredGroupPriority = 1100

// adminAccess reads the namespace label that allows admin access to
// devices from the host cluster's namespaces in aggregated mode, else
// from core-lite's. With neither, admin access is refused.
func (e *ExtraConfig) adminAccess() resourceclaim.AdminAccess {
	switch {
	case e.HostNamespaces != nil:
		return resourceclaim.AdminAccess{Namespaces: e.HostNamespaces}
	case e.CoreLite != nil:
		return resourceclaim.AdminAccess{Namespaces: e.CoreLite.client.CoreV1().Namespaces()}
	}
	return resourceclaim.AdminAccess{}
}
