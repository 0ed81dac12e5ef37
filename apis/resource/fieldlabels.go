package resource

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AddFieldLabelConversion registers the field selectors kind accepts:
// metadata.name and labels, passed through unchanged. The version
// packages call it for their kinds; metadata.namespace needs no
// registration.
func AddFieldLabelConversion(scheme *runtime.Scheme, kind schema.GroupVersionKind, labels ...string) error {
	err := scheme.AddFieldLabelConversionFunc(kind, func(label, value string) (string, string, error) {
		if label == "metadata.name" || slices.Contains(labels, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported for %s: %s", kind, label)
	})
	if err != nil {
		return fmt.Errorf("add field label conversion for %s: %w", kind, err)
	}
	return nil
}
