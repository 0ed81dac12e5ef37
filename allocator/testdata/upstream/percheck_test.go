package upstreamcompare

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// ours is a workload in draplane's types, converted from upstream's.
type ours struct {
	inv    *allocator.Inventory
	state  *allocator.State
	claims []*resourceapi.ResourceClaim
}

func toOurs(a *allocator.Allocator, w workload) ours {
	classes := map[string]*resourceapi.DeviceClass{}
	for name, c := range w.classes {
		classes[name] = ptr(conv[resourceapi.DeviceClass](c))
	}
	slices := convAll[resourceapi.ResourceSlice](w.slices)
	claims := convAll[resourceapi.ResourceClaim](w.claims)
	inUse := allocator.NewInUse()
	for id := range w.used {
		inUse.AddAllocation(&resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "old", Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String()}}}})
	}
	inv := a.Prepare(allocator.Snapshot{Classes: classes, Slices: slices})
	return ours{inv: inv, state: inv.State(inUse), claims: claims}
}

// BenchmarkPerCheck times one node check of each allocator on the same
// snapshot, in one process, interleaved: every iteration checks every node
// with upstream's allocator, then with ours, and the ratio of the two
// times is reported (upstream/ours, higher is better for ours), so that a
// change that makes our check slower relative to upstream's shows here.
//
// Upstream's NewAllocator runs once per pod in the scheduler; it is made
// outside the timed part here, and so is ours per pod, NewCheck (claims
// planned: classes resolved, selectors compiled); our inventory and state
// are kept current by the controller, not made per pod. Timed is
// upstream's Allocate per node, which builds the AllocationResults of
// every node that fits (the scheduler's Filter keeps them), against our
// Check.Fits per node, which answers fit or not and leaves the results to
// the node chosen (SelectNode). Both check the same nodes and must agree
// on how many fit. Also reported, not in the ratio: ours-allocate-ns/check,
// our one-shot Allocate per node (plan and results each time, as the
// preemption and gang searches call it), and ours-allocs/check, the heap
// allocations of one Check.Fits.
func BenchmarkPerCheck(b *testing.B) {
	for _, tc := range []struct {
		name string
		w    func() workload
	}{
		{"500x8/empty", func() workload { return simple(500, 8, "") }},
		{"500x8/halfFull", func() workload { return simple(500, 8, "half") }},
		{"500x8/fullButOne", func() workload { return simple(500, 8, "fullButOne") }},
		{"500x8/celSelector", celW},
		{"500x8/matchAttribute4", matchAttr},
		{"500x14/partitionable", func() workload { return partitionable(500) }},
	} {
		b.Run(tc.name, func(b *testing.B) { benchPerCheck(b, tc.w()) })
	}
}

func benchPerCheck(b *testing.B, w workload) {
	ctx := context.Background()
	celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
	state := structured.AllocatedState{AllocatedDevices: w.used, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	newUpstream := func() structured.Allocator {
		a, err := structured.NewAllocator(ctx, features, state, w.classes, w.slices, celCache)
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	ourAllocator := allocator.New(allocator.Options{})
	o := toOurs(ourAllocator, w)
	upstreamFits := func(a structured.Allocator) (fits int) {
		for _, n := range w.nodes {
			if res, err := a.Allocate(ctx, n, w.claims); err == nil && res != nil {
				fits++
			}
		}
		return fits
	}
	newCheck := func() *allocator.Check {
		c, err := ourAllocator.NewCheck(ctx, o.state, o.claims)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	ourFits := func(c *allocator.Check) (fits int) {
		for _, n := range w.nodes {
			ok, _, err := c.Fits(n)
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				fits++
			}
		}
		return fits
	}
	ourAllocates := func() (fits int) {
		for _, n := range w.nodes {
			res, err := ourAllocator.Allocate(ctx, o.state, o.claims, n)
			if err != nil {
				b.Fatal(err)
			}
			if res.Fits() {
				fits++
			}
		}
		return fits
	}
	if up, our, allocated := upstreamFits(newUpstream()), ourFits(newCheck()), ourAllocates(); up != our || up != allocated || up == 0 {
		b.Fatalf("nodes that fit: upstream %d, our Check %d, our Allocate %d; want the same, above 0", up, our, allocated)
	}
	var upstreamTime, ourTime, allocateTime time.Duration
	checks := 0
	for b.Loop() {
		a := newUpstream()
		start := time.Now()
		upstreamFits(a)
		upstreamTime += time.Since(start)
		c := newCheck()
		start = time.Now()
		ourFits(c)
		ourTime += time.Since(start)
		start = time.Now()
		ourAllocates()
		allocateTime += time.Since(start)
		checks += len(w.nodes)
	}
	c := newCheck()
	allocs := testing.AllocsPerRun(3, func() { ourFits(c) })
	b.ReportMetric(float64(upstreamTime.Nanoseconds())/float64(checks), "upstream-ns/check")
	b.ReportMetric(float64(ourTime.Nanoseconds())/float64(checks), "ours-ns/check")
	b.ReportMetric(float64(upstreamTime)/float64(ourTime), "upstream/ours")
	b.ReportMetric(float64(allocateTime.Nanoseconds())/float64(checks), "ours-allocate-ns/check")
	b.ReportMetric(allocs/float64(len(w.nodes)), "ours-allocs/check")
}

// The conversion from upstream's types must keep what the allocators
// read; a field lost on the way would make the comparison meaningless.
func TestPerCheckConversion(t *testing.T) {
	w := partitionable(4)
	o := toOurs(allocator.New(allocator.Options{}), w)
	if len(o.claims) != 1 || len(o.claims[0].Spec.Devices.Requests) != 1 || o.claims[0].Spec.Devices.Requests[0].Exactly == nil {
		t.Fatalf("claims after conversion: %+v", o.claims)
	}
	slice := conv[resourceapi.ResourceSlice](w.slices[1])
	if len(slice.Spec.SharedCounters) != 2 {
		t.Errorf("shared counters lost in the conversion: %+v", slice.Spec)
	}
}
