package v1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// addFieldLabelConversions registers the field selectors this version
// accepts beyond metadata.name and metadata.namespace, which the server
// accepts for every kind without registration.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	kind := SchemeGroupVersion.WithKind("ResourceSlice")
	err := scheme.AddFieldLabelConversionFunc(kind, func(label, value string) (string, string, error) {
		switch label {
		case "metadata.name",
			resourceapi.ResourceSliceSelectorNodeName,
			resourceapi.ResourceSliceSelectorDriver,
			resourceapi.ResourceSliceSelectorPoolName:
			return label, value, nil
		default:
			return "", "", fmt.Errorf("field label not supported for %s: %s", kind, label)
		}
	})
	if err != nil {
		return fmt.Errorf("add field label conversion for %s: %w", kind, err)
	}
	pools := SchemeGroupVersion.WithKind("ResourcePoolUsage")
	err = scheme.AddFieldLabelConversionFunc(pools, func(label, value string) (string, string, error) {
		switch label {
		case "metadata.name", resourceapi.ResourcePoolSelectorDriver, resourceapi.ResourcePoolSelectorNodeName:
			return label, value, nil
		default:
			return "", "", fmt.Errorf("field label not supported for %s: %s", pools, label)
		}
	})
	if err != nil {
		return fmt.Errorf("add field label conversion for %s: %w", pools, err)
	}
	return nil
}
