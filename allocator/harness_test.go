package allocator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// The harness: an allocation problem, and running the allocator on it with
// every successful result validated by the independent checker
// (checker_test.go).

// instance is everything one allocation decision depends on.
type instance struct {
	classes map[string]*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	rules   []*resourceapi.DeviceTaintRule
	prior   []*resourceapi.AllocationResult
	claims  []*resourceapi.ResourceClaim
	node    *corev1.Node
}

func (in *instance) snapshot() Snapshot {
	return Snapshot{Classes: in.classes, Slices: in.slices, TaintRules: in.rules}
}

func (in *instance) inUse() *InUse {
	u := NewInUse()
	for _, a := range in.prior {
		u.AddAllocation(a)
	}
	return u
}

// runChecked allocates and validates the result, failing the test on an
// invalid one.
func runChecked(ctx context.Context, a *Allocator, in *instance) (Result, error) {
	inv := a.Prepare(in.snapshot())
	res, err := a.Allocate(ctx, inv.State(in.inUse()), in.claims, in.node)
	if err != nil {
		return res, err
	}
	if res.Fits() {
		if err := newRefWorld(in).check(res.Allocations); err != nil {
			return res, fmt.Errorf("invalid allocation: %w", err)
		}
	}
	return res, nil
}
