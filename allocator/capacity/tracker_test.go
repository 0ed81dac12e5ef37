package capacity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

const driver = "gpu.example.com"

func slice(node string, devices ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: new(node),
		},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
	}
	return s
}

func claim(uid, pool string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
	if len(devices) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: pool, Device: d})
		}
	}
	return c
}

// TestTrackerIsIncremental follows a sequence of events and checks after
// each the counts, the class totals, the changes announced and that only
// the touched pools were counted again.
func TestTrackerIsIncremental(t *testing.T) {
	ctx := context.Background()
	tr := New(allocator.New(allocator.Options{}))
	var changes []Change
	tr.OnChange(func(c Change) { changes = append(changes, c) })

	tr.SetClass(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}}}})
	for i := range 10 {
		tr.SetSlice(ctx, slice(fmt.Sprintf("node-%d", i), "gpu-0", "gpu-1"))
	}
	free := func(node string) int {
		u, ok := tr.Pool(allocator.PoolID{Driver: driver, Pool: node})
		if !ok {
			return -1
		}
		return u.Free
	}

	steps := []struct {
		name       string
		event      func()
		recomputes uint64
		changed    []string // pools announced, in order
		deleted    bool
		node3Free  int
		classFree  int
	}{
		{"allocate on node-3", func() { tr.SetClaim(ctx, claim("c1", "node-3", "gpu-0")) }, 1, []string{"node-3"}, false, 1, 19},
		{"same allocation again (reservedFor changed)", func() { tr.SetClaim(ctx, claim("c1", "node-3", "gpu-0")) }, 0, nil, false, 1, 19},
		{"unallocated claim elsewhere", func() { tr.SetClaim(ctx, claim("c2", "node-5")) }, 0, nil, false, 1, 19},
		{"taint rule on node-3", func() {
			tr.SetRule(ctx, &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: new(driver), Pool: new("node-3"), Device: new("gpu-1")},
				Taint:          resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}})
		}, 1, []string{"node-3"}, false, 0, 18},
		{"release", func() { tr.DeleteClaim(ctx, "c1") }, 1, []string{"node-3"}, false, 1, 19},
		{"rule gone", func() { tr.DeleteRule(ctx, "r") }, 1, []string{"node-3"}, false, 2, 20},
		{"slice of node-3 deleted", func() { tr.DeleteSlice(ctx, "node-3-gpus") }, 0, []string{"node-3"}, true, -1, 18},
	}
	for _, step := range steps {
		before := tr.Recomputes()
		changes = nil
		step.event()
		if got := tr.Recomputes() - before; got != step.recomputes {
			t.Errorf("%s: %d pools counted, want %d", step.name, got, step.recomputes)
		}
		var names []string
		for _, c := range changes {
			names = append(names, c.Pool.ID.Pool)
			if c.Deleted != step.deleted {
				t.Errorf("%s: change of %s deleted=%v", step.name, c.Pool.ID.Pool, c.Deleted)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(step.changed) {
			t.Errorf("%s: changes %v, want %v", step.name, names, step.changed)
		}
		if got := free("node-3"); got != step.node3Free {
			t.Errorf("%s: node-3 free %d, want %d", step.name, got, step.node3Free)
		}
		if got := tr.Classes()["gpu"]; got.Free != step.classFree {
			t.Errorf("%s: class gpu %+v, want %d free", step.name, got, step.classFree)
		}
	}
	pools, _ := tr.Pools()
	if len(pools) != 9 {
		t.Errorf("%d pools left, want 9", len(pools))
	}
}

// TestTrackerMatchesFullCount applies random events and compares, after
// each, the tracker's incremental counts with one count of everything by
// the allocator.
func TestTrackerMatchesFullCount(t *testing.T) {
	ctx := context.Background()
	alloc := allocator.New(allocator.Options{})
	tr := New(alloc)
	rng := rand.New(rand.NewPCG(1, 2))
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "a"`}}}}}
	slices := map[string]*resourceapi.ResourceSlice{}
	claims := map[types.UID]*resourceapi.ResourceClaim{}
	rules := map[string]*resourceapi.DeviceTaintRule{}
	classes := map[string]*resourceapi.DeviceClass{}
	node := func() string { return fmt.Sprintf("node-%d", rng.IntN(6)) }
	for step := range 400 {
		switch rng.IntN(7) {
		case 0, 1:
			s := slice(node(), "gpu-0", "gpu-1", "gpu-2")
			s.Spec.Pool.Generation = int64(rng.IntN(3))
			for i := range s.Spec.Devices {
				model := []string{"a", "b"}[rng.IntN(2)]
				s.Spec.Devices[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: new(model)}}
			}
			slices[s.Name] = s
			tr.SetSlice(ctx, s)
		case 2:
			name := node() + "-gpus"
			delete(slices, name)
			tr.DeleteSlice(ctx, name)
		case 3, 4:
			uid := fmt.Sprintf("c%d", rng.IntN(8))
			c := claim(uid, node(), fmt.Sprintf("gpu-%d", rng.IntN(3)))
			if rng.IntN(3) == 0 {
				c.Status.Allocation = nil
			}
			claims[c.UID] = c
			tr.SetClaim(ctx, c)
		case 5:
			uid := types.UID(fmt.Sprintf("c%d", rng.IntN(8)))
			delete(claims, uid)
			tr.DeleteClaim(ctx, uid)
		case 6:
			if rng.IntN(2) == 0 {
				r := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", rng.IntN(3))}, Spec: resourceapi.DeviceTaintRuleSpec{
					DeviceSelector: &resourceapi.DeviceTaintSelector{Pool: new(node())},
					Taint:          resourceapi.DeviceTaint{Key: "k", Effect: resourceapi.DeviceTaintEffectNoExecute}}}
				rules[r.Name] = r
				tr.SetRule(ctx, r)
			} else if _, ok := classes["gpu"]; ok {
				delete(classes, "gpu")
				tr.DeleteClass(ctx, "gpu")
			} else {
				classes["gpu"] = class
				tr.SetClass(ctx, class)
			}
		}

		snap := allocator.Snapshot{Classes: classes}
		for _, s := range slices {
			snap.Slices = append(snap.Slices, s)
		}
		for _, r := range rules {
			snap.TaintRules = append(snap.TaintRules, r)
		}
		inUse := allocator.NewInUse()
		for _, c := range claims {
			inUse.AddClaim(c)
		}
		want := alloc.Prepare(snap).State(inUse).Usage(ctx)
		got, _ := tr.Pools()
		if !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("step %d: incremental counts differ from a full count:\n got %+v\nwant %+v", step, got, want)
		}
	}
}

// TestTrackerReusesInventories checks which events prepare a pool's
// inventory again: claims reuse it, slices, classes, rules and gates do
// not.
func TestTrackerReusesInventories(t *testing.T) {
	ctx := context.Background()
	tr := New(allocator.New(allocator.Options{}))
	class := func(expr string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
	}
	tr.SetClass(ctx, class(fmt.Sprintf("device.driver == %q", driver)))
	tr.SetSlice(ctx, slice("node-0", "gpu-0", "gpu-1"))
	tr.SetSlice(ctx, slice("node-1", "gpu-0", "gpu-1"))
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: new(driver), Pool: new("node-0"), Device: new("gpu-1")},
		Taint:          resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}

	for _, step := range []struct {
		name      string
		event     func()
		prepares  uint64
		classFree int
	}{
		{"allocate", func() { tr.SetClaim(ctx, claim("c1", "node-0", "gpu-0")) }, 0, 3},
		{"allocate more", func() { tr.SetClaim(ctx, claim("c1", "node-0", "gpu-0", "gpu-1")) }, 0, 2},
		{"release", func() { tr.DeleteClaim(ctx, "c1") }, 0, 4},
		{"slice changed", func() { tr.SetSlice(ctx, slice("node-0", "gpu-0")) }, 1, 3},
		{"class changed", func() { tr.SetClass(ctx, class(`device.driver == "other"`)) }, 2, 0},
		{"class back", func() { tr.SetClass(ctx, class(fmt.Sprintf("device.driver == %q", driver))) }, 2, 3},
		{"rule added", func() { tr.SetRule(ctx, rule) }, 1, 3},
		{"allocate after the rule", func() { tr.SetClaim(ctx, claim("c2", "node-1", "gpu-1")) }, 1, 2},
		{"slice deleted", func() { tr.DeleteSlice(ctx, "node-1-gpus") }, 0, 1},
	} {
		before := tr.prepares
		step.event()
		if got := tr.prepares - before; got != step.prepares {
			t.Errorf("%s: %d pools prepared, want %d", step.name, got, step.prepares)
		}
		if got := tr.Classes()["gpu"].Free; got != step.classFree {
			t.Errorf("%s: %d devices of class gpu free, want %d", step.name, got, step.classFree)
		}
	}
}

// TestTrackerBoundsInventories: with more pools than it keeps prepared,
// the tracker keeps at most maxInventories and still counts every pool.
func TestTrackerBoundsInventories(t *testing.T) {
	ctx := context.Background()
	tr := New(allocator.New(allocator.Options{}))
	tr.SetClass(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}}}}})
	pools := maxInventories + 100
	for i := range pools {
		tr.SetSlice(ctx, slice(fmt.Sprintf("node-%d", i), "gpu-0", "gpu-1"))
	}
	for i := range pools {
		tr.SetClaim(ctx, claim(fmt.Sprintf("c%d", i), fmt.Sprintf("node-%d", i), "gpu-0"))
	}
	if n := len(tr.inventories); n > maxInventories {
		t.Errorf("%d inventories kept, want at most %d", n, maxInventories)
	}
	if got := tr.Classes()["gpu"]; got.Devices != 2*pools || got.Free != pools {
		t.Errorf("class gpu %+v, want %d devices, %d free", got, 2*pools, pools)
	}
}

// TestTrackerOwnerMark: in cluster mode the taint that marks draplane's
// devices, in a slice or through a DeviceTaintRule, is not counted as a
// taint; other taints still are.
func TestTrackerOwnerMark(t *testing.T) {
	ctx := context.Background()
	const mark = "resource.draplane.dev/scheduler"
	marked := slice("node-a", "gpu-0", "gpu-1", "gpu-2")
	marked.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: mark, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	marked.Spec.Devices[2].Taints = []resourceapi.DeviceTaint{{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	ruled := slice("node-b", "gpu-0", "gpu-1")
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "owner"}, Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: new(driver), Pool: new("node-b")},
		Taint:          resourceapi.DeviceTaint{Key: mark, Effect: resourceapi.DeviceTaintEffectNoSchedule}}}
	for _, tc := range []struct {
		name           string
		mark           string
		taintedA, free int
	}{
		{"without an owner mark", "", 2, 1},
		{"with the owner mark", mark, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(allocator.New(allocator.Options{}))
			tr.SetOwnerMark(ctx, tc.mark)
			tr.SetSlice(ctx, marked)
			tr.SetSlice(ctx, ruled)
			tr.SetRule(ctx, rule)
			a, _ := tr.Pool(allocator.PoolID{Driver: driver, Pool: "node-a"})
			b, _ := tr.Pool(allocator.PoolID{Driver: driver, Pool: "node-b"})
			if a.Tainted != tc.taintedA {
				t.Errorf("node-a: %d tainted, want %d", a.Tainted, tc.taintedA)
			}
			if a.Free+b.Free != tc.free {
				t.Errorf("%d free in node-a and node-b, want %d", a.Free+b.Free, tc.free)
			}
			if got := marked.Spec.Devices[0].Taints; len(got) != 1 {
				t.Errorf("the cached slice was changed: %v", got)
			}
		})
	}
}
