package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestFieldLabelConversions: the served versions accept the ResourceSlice
// field selectors the registry supports, and nothing else.
func TestFieldLabelConversions(t *testing.T) {
	scheme := runtime.NewScheme()
	Install(scheme)
	for _, version := range []string{"v1", "v1beta1"} {
		gvk := resourceapi.SchemeGroupVersion.WithKind("ResourceSlice")
		gvk.Version = version
		for label, wantErr := range map[string]bool{
			"metadata.name": false, "spec.nodeName": false, "spec.driver": false, "spec.pool.name": false,
			"spec.devices": true, "metadata.namespace": true,
		} {
			_, _, err := scheme.ConvertFieldLabel(gvk, label, "x")
			if (err != nil) != wantErr {
				t.Errorf("%s %s: err %v, want error %v", version, label, err, wantErr)
			}
		}
	}
}
