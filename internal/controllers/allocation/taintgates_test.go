package allocation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

// TestSyncPodDeviceTaintGates: with DRADeviceTaints off the allocator
// ignores every device taint, as upstream's; with DRADeviceTaintRules off
// it ignores the taints of DeviceTaintRules but not those in slices.
func TestSyncPodDeviceTaintGates(t *testing.T) {
	pod1 := makePod("pod-1", withGeneratedClaim("gpu"))
	noSchedule := resourcev1.DeviceTaint{Key: "maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule}
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "maintenance"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Pool: ptr("node-a")},
			Taint:          noSchedule,
		},
	}
	taintedSlice := makeSlice("node-a", 1, "a100")
	taintedSlice.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{noSchedule}

	allocated := testCase{
		expectedNodes:       map[string]string{"pod-1": "node-a"},
		expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
		expectedEvents:      []string{"Normal Scheduled"},
		expectedPending:     1,
		expectedAttempts:    map[string]int{resultPlaced: 1},
	}
	refused := testCase{
		expectedErrors:        []string{errUnschedulable.Error()},
		expectedNodes:         map[string]string{"pod-1": ""},
		expectedAllocations:   map[string]string{"pod-1-gpu": ""},
		expectedUnschedulable: map[string]string{"pod-1": "maintenance"},
		expectedEvents:        []string{"Warning FailedScheduling"},
		expectedAttempts:      map[string]int{resultUnschedulable: 1},
	}
	tests := map[string]struct {
		taintsOff, rulesOff bool
		ruleTaint           bool
		want                testCase
	}{
		"rule, gates on: device not allocated":           {ruleTaint: true, want: refused},
		"rule, DRADeviceTaintRules off: rule ignored":    {ruleTaint: true, rulesOff: true, want: allocated},
		"rule, DRADeviceTaints off: taint ignored":       {ruleTaint: true, taintsOff: true, want: allocated},
		"slice taint, gates on: device not allocated":    {want: refused},
		"slice taint, DRADeviceTaints off: ignored":      {taintsOff: true, want: allocated},
		"slice taint, DRADeviceTaintRules off: honoured": {rulesOff: true, want: refused},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaints, !tt.taintsOff)
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaintRules, !tt.rulesOff)
			tc := tt.want
			tc.nodes = []*corev1.Node{makeNode("node-a")}
			tc.pods = []*corev1.Pod{pod1}
			tc.claims = []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")}
			if tt.ruleTaint {
				tc.slices = []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100")}
				tc.taintRules = []*resourcev1.DeviceTaintRule{rule}
			} else {
				tc.slices = []*resourcev1.ResourceSlice{taintedSlice}
			}
			runSyncTest(t, tc)
		})
	}
}
