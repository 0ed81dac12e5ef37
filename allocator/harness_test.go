package allocator

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

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
	before := inputsOf(in)
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
		// Callers may modify the results: that must not reach the
		// claims, classes or slices they were made from.
		for _, ar := range res.Allocations {
			scribble(reflect.ValueOf(ar).Elem())
		}
		if after := inputsOf(in); !apiequality.Semantic.DeepEqual(before, after) {
			return fmt.Errorf("modifying the AllocationResults changed the inputs: %s", cmp.Diff(before, after))
		}
	}
	return nil
}

// inputsOf deep-copies what the results are made from.
func inputsOf(in *instance) []any {
	var out []any
	for _, c := range in.claims {
		out = append(out, c.DeepCopy())
	}
	for _, name := range slices.Sorted(maps.Keys(in.classes)) {
		out = append(out, in.classes[name].DeepCopy())
	}
	for _, s := range in.slices {
		out = append(out, s.DeepCopy())
	}
	return out
}

// scribble changes every settable value reachable from v in place:
// strings, numbers and bools, slice elements, map values, pointees.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scribble(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~")
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.CanSet() {
			v.SetUint(v.Uint() + 1)
		}
	}
}
