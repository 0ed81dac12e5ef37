package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "resource.draplane.dev"

// SchemeGroupVersion is this version of the group.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Resource returns a group-qualified resource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// localSchemeBuilder is extended by the generated conversion and
	// defaulting registration in init functions.
	localSchemeBuilder = &SchemeBuilder
	SchemeBuilder      = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs, addFieldLabelConversions)
	AddToScheme        = localSchemeBuilder.AddToScheme
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
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
