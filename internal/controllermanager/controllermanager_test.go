package controllermanager

import (
	"slices"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2/ktesting"

	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/features"
)

// TestControllersFollowGates: as upstream's controller manager, the
// device taint eviction controller runs only with DRADeviceTaints on.
func TestControllersFollowGates(t *testing.T) {
	tests := map[string]struct {
		taintsOff bool
		want      []string
	}{
		"DRADeviceTaints on":  {want: []string{"resourceclaim", "allocation", "devicetainteviction", "podtermination", "staleslices", "podgc"}},
		"DRADeviceTaints off": {taintsOff: true, want: []string{"resourceclaim", "allocation", "podtermination", "staleslices", "podgc"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaints, !tc.taintsOff)
			logger, _ := ktesting.NewTestContext(t)
			kubeClient := kubefake.NewClientset()
			resourceClient := resourcefake.NewClientset()
			m := New(Config{Controllers: true, Workers: 1})
			controllers, err := m.newControllers(logger, kubeClient, resourceClient,
				informers.NewSharedInformerFactory(kubeClient, 0).Core().V1(), resourceinformers.NewSharedInformerFactory(resourceClient, 0).Resource().V1(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range controllers {
				names = append(names, c.name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("controllers %v, want %v", names, tc.want)
			}
		})
	}
}
