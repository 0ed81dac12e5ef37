package allocator

import (
	"context"
	"testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// idDev is a device that selector "id=<name>" picks out alone.
func idDev(name string, opts ...devOpt) resourceapi.Device {
	return mkDev(name, append([]devOpt{attr("id", name)}, opts...)...)
}

// TestUsageAgreesWithAllocator counts pools with State.Usage and checks
// every count against the allocator: the number of free devices is the
// number of devices that a one-device claim (one unit of capacity for
// shared devices) can get, per pool and per class.
func TestUsageAgreesWithAllocator(t *testing.T) {
	gpu := mkClass("gpu")
	big := mkClass("big", "size=big")
	partitioned := mkSlice("p", "n1", []resourceapi.Device{
		idDev("whole", attr("size", "big"), consumes("mem", "gb", 4)),
		idDev("half0", consumes("mem", "gb", 2)),
		idDev("half1", consumes("mem", "gb", 2)),
	}, counterSet("mem", map[string]int64{"gb": 4}))
	sharedSlice := mkSlice("s", "n1", []resourceapi.Device{
		idDev("nic0", shared("bw", 10, nil)),
		idDev("nic1", shared("bw", 10, nil)),
	})
	plain := func(opts ...devOpt) *resourceapi.ResourceSlice {
		return mkSlice("q", "n1", []resourceapi.Device{idDev("d0", opts...), idDev("d1")})
	}
	adminUse := used("q/d1")
	adminUse[0].Devices.Results[0].AdminAccess = new(true)

	tests := []struct {
		name  string
		in    instance
		want  PoolUsage // counts and counters/capacities of the only pool
		class map[string][2]int
	}{
		{
			name:  "partitionable, nothing used",
			in:    instance{classes: classes(gpu, big), slices: split(partitioned.DeepCopy())},
			want:  PoolUsage{Devices: 3, Free: 3, Counters: []CounterUsage{{CounterSet: "mem", Counter: "gb", Used: qty(0), Total: qty(4)}}},
			class: map[string][2]int{"gpu": {3, 3}, "big": {1, 1}},
		},
		{
			name:  "whole device in use makes its partitions unavailable",
			in:    instance{classes: classes(gpu, big), slices: split(partitioned.DeepCopy()), prior: used("p/whole")},
			want:  PoolUsage{Devices: 3, Allocated: 1, Free: 0, Counters: []CounterUsage{{CounterSet: "mem", Counter: "gb", Used: qty(4), Total: qty(4)}}},
			class: map[string][2]int{"gpu": {3, 0}, "big": {1, 0}},
		},
		{
			name:  "a partition consumes its parent's counters",
			in:    instance{classes: classes(gpu, big), slices: split(partitioned.DeepCopy()), prior: used("p/half0")},
			want:  PoolUsage{Devices: 3, Allocated: 1, Free: 1, Counters: []CounterUsage{{CounterSet: "mem", Counter: "gb", Used: qty(2), Total: qty(4)}}},
			class: map[string][2]int{"gpu": {3, 1}, "big": {1, 0}},
		},
		{
			name:  "shared device is allocated but not exhausted",
			in:    instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{sharedSlice}, prior: used("s/nic0=bw:6")},
			want:  PoolUsage{Devices: 2, Allocated: 1, Free: 2, Capacities: []CapacityUsage{{Name: "bw", Used: qty(6), Total: qty(20)}}},
			class: map[string][2]int{"gpu": {2, 2}},
		},
		{
			name:  "shared device with its capacity used up is not free",
			in:    instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{sharedSlice}, prior: used("s/nic0=bw:6", "s/nic0=bw:4", "s/nic1=bw:1")},
			want:  PoolUsage{Devices: 2, Allocated: 2, Free: 1, Capacities: []CapacityUsage{{Name: "bw", Used: qty(11), Total: qty(20)}}},
			class: map[string][2]int{"gpu": {2, 1}},
		},
		{
			name:  "slice taint NoSchedule",
			in:    instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{plain(taint("k", "v", resourceapi.DeviceTaintEffectNoSchedule))}},
			want:  PoolUsage{Devices: 2, TaintedNoSchedule: 1, Free: 1},
			class: map[string][2]int{"gpu": {2, 1}},
		},
		{
			name: "taint rule NoExecute, effect None is not counted",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{plain(taint("k", "v", resourceapi.DeviceTaintEffectNone))}, rules: []*resourceapi.DeviceTaintRule{{
				Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: &resourceapi.DeviceTaintSelector{Device: new("d1")}, Taint: resourceapi.DeviceTaint{Key: "k", Effect: resourceapi.DeviceTaintEffectNoExecute}}}}},
			want:  PoolUsage{Devices: 2, TaintedNoExecute: 1, Free: 1},
			class: map[string][2]int{"gpu": {2, 1}},
		},
		{
			name:  "admin access does not make a device busy",
			in:    instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{plain()}, prior: append(used("q/d0"), adminUse...)},
			want:  PoolUsage{Devices: 2, Allocated: 1, AdminAccess: 1, Free: 1},
			class: map[string][2]int{"gpu": {2, 1}},
		},
		{
			name:  "incomplete pool is unusable",
			in:    instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("q", "n1", []resourceapi.Device{idDev("d0"), idDev("d1")}, generation(1, 2))}},
			want:  PoolUsage{Devices: 2, Unusable: 2},
			class: map[string][2]int{"gpu": {2, 0}},
		},
	}
	ctx := context.Background()
	node := mkNode("n1")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAllocator()
			inv := a.Prepare(tc.in.snapshot())
			st := inv.State(tc.in.inUse())
			pools := st.Usage(ctx)
			if len(pools) != 1 {
				t.Fatalf("want one pool, got %d", len(pools))
			}
			got := pools[0]
			counts := func(u PoolUsage) [7]int {
				return [7]int{u.Devices, u.Allocated, u.AdminAccess, u.TaintedNoSchedule, u.TaintedNoExecute, u.Unusable, u.Free}
			}
			if counts(got) != counts(tc.want) {
				t.Errorf("devices, allocated, admin, NoSchedule, NoExecute, unusable, free: got %v, want %v", counts(got), counts(tc.want))
			}
			if got.Complete != (tc.want.Unusable == 0) {
				t.Errorf("complete: got %v", got.Complete)
			}
			checkQuantities(t, "counter", len(got.Counters), len(tc.want.Counters), func(i int) (string, string, string, string) {
				return got.Counters[i].Used.String(), tc.want.Counters[i].Used.String(), got.Counters[i].Total.String(), tc.want.Counters[i].Total.String()
			})
			checkQuantities(t, "capacity", len(got.Capacities), len(tc.want.Capacities), func(i int) (string, string, string, string) {
				return got.Capacities[i].Used.String(), tc.want.Capacities[i].Used.String(), got.Capacities[i].Total.String(), tc.want.Capacities[i].Total.String()
			})
			gotClass := map[string][2]int{}
			for _, c := range got.Classes {
				gotClass[c.Class] = [2]int{c.Devices, c.Free}
			}
			for name, want := range tc.class {
				if gotClass[name] != want {
					t.Errorf("class %s: got devices/free %v, want %v", name, gotClass[name], want)
				}
			}

			// The allocator's own answer, device by device.
			allocatable := map[string]int{}
			for _, s := range tc.in.slices {
				for _, d := range s.Spec.Devices {
					req := mkReq("r", "gpu", 1, selector("id="+d.Name))
					if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
						req = mkReq("r", "gpu", 1, selector("id="+d.Name), capacityReq("bw", 1))
					}
					res, err := a.Allocate(ctx, st, []*resourceapi.ResourceClaim{mkClaim("c", req)}, node)
					if err != nil {
						t.Fatal(err)
					}
					if res.Fits() {
						allocatable["gpu"]++
						if d.Attributes["size"].StringValue != nil {
							allocatable["big"]++
						}
					}
				}
			}
			if got.Free != allocatable["gpu"] {
				t.Errorf("usage says %d free, the allocator can allocate %d devices one by one", got.Free, allocatable["gpu"])
			}
			for name, c := range gotClass {
				if c[1] != allocatable[name] {
					t.Errorf("class %s: usage says %d free, the allocator can allocate %d", name, c[1], allocatable[name])
				}
			}
		})
	}
}

func checkQuantities(t *testing.T, what string, got, want int, pair func(int) (string, string, string, string)) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %d entries, want %d", what, got, want)
		return
	}
	for i := range got {
		gu, wu, gt, wt := pair(i)
		if gu != wu || gt != wt {
			t.Errorf("%s %d: got %s/%s, want %s/%s", what, i, gu, gt, wu, wt)
		}
	}
}
