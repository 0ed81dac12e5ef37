package upstreamv1

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// GroupName is upstream's API group.
const GroupName = resourcev1.GroupName

// SchemeGroupVersion is the served version, resource.k8s.io/v1.
var SchemeGroupVersion = resourcev1.SchemeGroupVersion

// InternalGroupVersion is the hub the API server converts
// resource.k8s.io/v1 through. Its types are resource.draplane.dev's
// internal ones, so an object read through one group is the same object
// in the other, and the server converts between the two groups' versions
// (managed fields of both groups' managers, for one) by way of them.
var InternalGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Resource returns a resource of resource.k8s.io.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// localSchemeBuilder is extended by the generated conversions in an
	// init function. It is our own builder, not k8s.io/api's, so that
	// nothing else in the process that registers k8s.io/api's types gets
	// our conversions and defaults.
	localSchemeBuilder = &SchemeBuilder
	SchemeBuilder      = runtime.NewSchemeBuilder(resourcev1.AddToScheme, addInternalTypes, addDefaultingFuncs, addFieldLabelConversions)
	AddToScheme        = localSchemeBuilder.AddToScheme
)

// addInternalTypes registers our internal types as upstream's hub too.
// ResourcePoolUsage stays in our group only.
func addInternalTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(InternalGroupVersion,
		&resourceapi.DeviceClass{}, &resourceapi.DeviceClassList{},
		&resourceapi.ResourceClaim{}, &resourceapi.ResourceClaimList{},
		&resourceapi.ResourceClaimTemplate{}, &resourceapi.ResourceClaimTemplateList{},
		&resourceapi.ResourceSlice{}, &resourceapi.ResourceSliceList{},
		&resourceapi.DeviceTaintRule{}, &resourceapi.DeviceTaintRuleList{},
	)
	return nil
}

// addFieldLabelConversions accepts the field selectors of our group's
// ResourceSlice in upstream's too.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	return resourceapi.AddFieldLabelConversion(scheme, SchemeGroupVersion.WithKind("ResourceSlice"),
		resourceapi.ResourceSliceSelectorNodeName,
		resourceapi.ResourceSliceSelectorDriver,
		resourceapi.ResourceSliceSelectorPoolName)
}
