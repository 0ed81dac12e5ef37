package resource

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "resource.draplane.dev"

// SchemeGroupVersion is the internal version used to register the hub types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Kind returns a group-qualified kind.
func Kind(kind string) schema.GroupKind { return SchemeGroupVersion.WithKind(kind).GroupKind() }

// Resource returns a group-qualified resource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&DeviceClass{}, &DeviceClassList{},
		&ResourceClaim{}, &ResourceClaimList{},
		&ResourceClaimTemplate{}, &ResourceClaimTemplateList{},
		&ResourceSlice{}, &ResourceSliceList{},
		&DeviceTaintRule{}, &DeviceTaintRuleList{},
		&ResourcePoolUsage{}, &ResourcePoolUsageList{},
	)
	return nil
}
