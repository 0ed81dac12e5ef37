package simulator

import (
	"slices"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestBindingConditions: with a binding condition the simulated devices
// list it and its failure condition; the driver reports the condition
// True on an allocated device once the delay since the allocation has
// passed, the failure condition on the failing nodes, and leaves devices
// of other drivers, other nodes and reported ones alone.
func TestBindingConditions(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts := Options{Nodes: 2, DevicesPerNode: 1, Driver: driver, BindingCondition: "Attached", BindingDelay: 5 * time.Second, BindingFailureNodes: []string{"sim-node-1"}}

	s := &Simulator{opts: opts}
	s.opts.BindingFailureCondition = DefaultBindingFailureCondition
	device := s.DesiredSlice("sim-node-0", 1).Spec.Devices[0]
	if !slices.Equal(device.BindingConditions, []string{"Attached"}) || !slices.Equal(device.BindingFailureConditions, []string{DefaultBindingFailureCondition}) {
		t.Errorf("device conditions %v / %v", device.BindingConditions, device.BindingFailureConditions)
	}

	claim := func(name, resultDriver, node string, status ...string) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
				AllocationTimestamp: &metav1.Time{Time: start},
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: resultDriver, Pool: node, Device: "gpu-0",
					BindingConditions: []string{"Attached"}, BindingFailureConditions: []string{DefaultBindingFailureCondition},
				}}},
			}},
		}
		for _, condition := range status {
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: resultDriver, Pool: node, Device: "gpu-0",
				Conditions: []metav1.Condition{{Type: condition, Status: metav1.ConditionFalse, Reason: "Waiting", LastTransitionTime: metav1.Time{Time: start}}}}}
		}
		return c
	}
	tests := []struct {
		name    string
		claim   *resourcev1.ResourceClaim
		advance time.Duration
		// want is the condition set True, "" for none; wantAfter the
		// requeue delay.
		want      string
		wantAfter time.Duration
	}{
		{name: "before the delay: later", claim: claim("early", driver, "sim-node-0"), advance: 2 * time.Second, wantAfter: 3 * time.Second},
		{name: "after the delay: ready", claim: claim("ready", driver, "sim-node-0"), advance: 5 * time.Second, want: "Attached"},
		{name: "failing node: failure condition", claim: claim("fails", driver, "sim-node-1"), advance: 5 * time.Second, want: DefaultBindingFailureCondition},
		{name: "other driver", claim: claim("other", "gpu.example.com", "sim-node-0"), advance: time.Minute},
		{name: "node not simulated", claim: claim("elsewhere", driver, "node-9"), advance: time.Minute},
		{name: "reported already", claim: claim("reported", driver, "sim-node-0", "Attached"), advance: time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newSimulator(t, opts, nil, []runtime.Object{tc.claim})
			clock := testingclock.NewFakeClock(start)
			h.sim.clock = clock
			if err := h.claims.Add(tc.claim); err != nil {
				t.Fatal(err)
			}
			h.sim.enqueueBinding(tc.claim)
			if queued := h.sim.bindingQueue.Len() == 1; queued != (tc.want != "" || tc.wantAfter > 0) {
				t.Errorf("queued: %v", queued)
			}
			clock.Step(tc.advance)
			after, err := h.sim.syncBinding(h.ctx, "ns/"+tc.claim.Name)
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.wantAfter {
				t.Errorf("look again after %v, want %v", after, tc.wantAfter)
			}
			got, err := h.resource.ResourceV1().ResourceClaims("ns").Get(h.ctx, tc.claim.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var set []string
			for _, d := range got.Status.Devices {
				for _, c := range d.Conditions {
					if c.Status == metav1.ConditionTrue {
						set = append(set, c.Type)
					}
				}
			}
			want := []string(nil)
			if tc.want != "" {
				want = []string{tc.want}
				if c := apimeta.FindStatusCondition(got.Status.Devices[0].Conditions, tc.want); c.Reason != ReasonSimulated || c.Message == "" {
					t.Errorf("condition %+v", c)
				}
			}
			if !slices.Equal(set, want) {
				t.Errorf("conditions set True: %v, want %v", set, want)
			}
		})
	}
}
