package reliability

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestCheckerDetectsDoubleAllocation: the churn test's checker fails on a
// device in two allocations at once or twice in one, and only then (fast; always runs).
func TestCheckerDetectsDoubleAllocation(t *testing.T) {
	claim := func(name string, admin bool, devices ...string) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		if len(devices) > 0 {
			c.Status.Allocation = &resourcev1.AllocationResult{}
			for _, d := range devices {
				c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
					resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: simDriver, Pool: "sim-node-0", Device: d, AdminAccess: ptr.To(admin)})
			}
		}
		return c
	}
	c := newChecker()
	c.claim(watch.Added, claim("a", false, "gpu-0"))
	c.claim(watch.Added, claim("b", false, "gpu-1"))
	c.claim(watch.Modified, claim("a", false, "gpu-0")) // same claim again: fine
	c.claim(watch.Modified, claim("a", false))          // deallocated
	c.claim(watch.Modified, claim("b", false, "gpu-0")) // moves to a freed device
	c.claim(watch.Added, claim("admin", true, "gpu-0")) // admin access shares
	c.claim(watch.Deleted, claim("b", false, "gpu-0"))
	c.claim(watch.Added, claim("c", false, "gpu-0"))
	if len(c.violations) != 0 {
		t.Fatalf("violations without a double allocation: %v", c.violations)
	}
	c.claim(watch.Added, claim("d", false, "gpu-0"))
	if len(c.violations) != 1 || !strings.Contains(c.violations[0], "gpu.sim.draplane.dev/sim-node-0/gpu-0 allocated to default/c and default/d") {
		t.Fatalf("violations %v, want one about gpu-0 in c and d", c.violations)
	}

	// A device listed twice inside one claim is a double allocation too.
	c = newChecker()
	c.claim(watch.Added, claim("e", false, "gpu-2", "gpu-2"))
	if len(c.violations) != 1 || !strings.Contains(c.violations[0], "gpu.sim.draplane.dev/sim-node-0/gpu-2 listed twice in the allocation of default/e") {
		t.Fatalf("violations %v, want one about gpu-2 twice in e", c.violations)
	}
	if c.allocations != 1 || c.deviceChecks != 2 {
		t.Fatalf("%d allocations and %d device checks counted, want 1 and 2", c.allocations, c.deviceChecks)
	}
}
