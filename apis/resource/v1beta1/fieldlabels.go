package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// addFieldLabelConversions registers the field selectors this version
// accepts beyond metadata.name and metadata.namespace, which the server
// accepts for every kind without registration.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	return resourceapi.AddFieldLabelConversion(scheme, SchemeGroupVersion.WithKind("ResourceSlice"),
		resourceapi.ResourceSliceSelectorNodeName,
		resourceapi.ResourceSliceSelectorDriver,
		resourceapi.ResourceSliceSelectorPoolName)
}
