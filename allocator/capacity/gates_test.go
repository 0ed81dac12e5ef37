package capacity

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// TestTrackerTaintGates: the counts of tainted devices follow the gates
// as the allocator does: no taint counts with DRADeviceTaints off, no
// rule's with DRADeviceTaintRules off.
func TestTrackerTaintGates(t *testing.T) {
	noSchedule := resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	tests := map[string]struct {
		taintsOff, rulesOff bool
		wantTainted         int
	}{
		"gates on: slice taint and rule":   {wantTainted: 2},
		"DRADeviceTaintRules off: slice's": {rulesOff: true, wantTainted: 1},
		"DRADeviceTaints off: none":        {taintsOff: true, wantTainted: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaints, !tc.taintsOff)
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaintRules, !tc.rulesOff)
			ctx := context.Background()
			tr := New(allocator.New(allocator.Options{}))
			s := slice("node-1", "gpu-0", "gpu-1", "gpu-2")
			s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{noSchedule}
			tr.SetSlice(ctx, s)
			tr.SetRule(ctx, &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: new(driver), Pool: new("node-1"), Device: new("gpu-1")},
				Taint:          noSchedule}})
			u, ok := tr.Pool(allocator.PoolID{Driver: driver, Pool: "node-1"})
			if !ok {
				t.Fatal("pool node-1 not counted")
			}
			if u.Tainted != tc.wantTainted || u.Free != 3-tc.wantTainted {
				t.Errorf("tainted %d, free %d; want %d tainted, %d free", u.Tainted, u.Free, tc.wantTainted, 3-tc.wantTainted)
			}
		})
	}
}

// TestTrackerBindingConditionsGate: with DRADeviceBindingConditions off a
// device that lists binding conditions is never allocated, so the counts
// do not call it free, neither in the pool nor in a class that matches it.
func TestTrackerBindingConditionsGate(t *testing.T) {
	tests := map[string]struct {
		gateOff  bool
		wantFree int
	}{
		"gate on: allocatable":  {wantFree: 3},
		"gate off: not counted": {gateOff: true, wantFree: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceBindingConditions, !tc.gateOff)
			ctx := context.Background()
			tr := New(allocator.New(allocator.Options{}))
			tr.SetClass(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}}})
			s := slice("node-1", "gpu-0", "gpu-1", "gpu-2")
			s.Spec.Devices[1].BindingConditions = []string{"attached"}
			s.Spec.Devices[1].BindingFailureConditions = []string{"failed"}
			tr.SetSlice(ctx, s)
			u, ok := tr.Pool(allocator.PoolID{Driver: driver, Pool: "node-1"})
			if !ok {
				t.Fatal("pool node-1 not counted")
			}
			if u.Devices != 3 || u.Free != tc.wantFree {
				t.Errorf("devices %d, free %d; want 3 devices, %d free", u.Devices, u.Free, tc.wantFree)
			}
			if got := tr.Classes()["gpu"]; got.Devices != 3 || got.Free != tc.wantFree {
				t.Errorf("class gpu: %+v; want 3 devices, %d free", got, tc.wantFree)
			}
		})
	}
}
