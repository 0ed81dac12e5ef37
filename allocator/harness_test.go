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
	st := inv.State(in.inUse())
	res, err := a.Allocate(ctx, st, in.claims, in.node)
	if err != nil {
		return res, err
	}
	if res.Fits() {
		if err := newRefWorld(in).check(res.Allocations); err != nil {
			return res, fmt.Errorf("invalid allocation: %w", err)
		}
	}
	return res, checkAgrees(ctx, a, st, in, res)
}

// checkAgrees runs the claims through one Check, node check after node
// check as SelectNode does: it must answer what Allocate did each time, and
// its Allocate after Fits must build a valid result.
func checkAgrees(ctx context.Context, a *Allocator, st *State, in *instance, want Result) error {
	check, err := a.NewCheck(ctx, st, in.claims)
	if err != nil {
		return fmt.Errorf("NewCheck: %w", err)
	}
	for round := range 2 {
		ok, expl, err := check.Fits(in.node)
		if err != nil {
			return fmt.Errorf("Check.Fits, round %d: %w", round, err)
		}
		if ok != want.Fits() {
			return fmt.Errorf("Check.Fits, round %d: fits=%v, Allocate fits=%v", round, ok, want.Fits())
		}
		if !ok && expl.Summary() != want.Explanation.Summary() {
			return fmt.Errorf("Check.Fits, round %d: explanation %q, Allocate's %q", round, expl.Summary(), want.Explanation.Summary())
		}
	}
	res, err := check.Allocate(in.node)
	if err != nil {
		return fmt.Errorf("Check.Allocate: %w", err)
	}
	if res.Fits() != want.Fits() {
		return fmt.Errorf("Check.Allocate: fits=%v, Allocate fits=%v", res.Fits(), want.Fits())
	}
	if res.Fits() {
		if err := newRefWorld(in).check(res.Allocations); err != nil {
			return fmt.Errorf("invalid allocation from Check.Allocate: %w", err)
		}
	}
	return nil
}
