package allocator

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Benchmarks with fixed, named workloads. Each measures choosing a node for
// one pod: SelectNode over every node.

const benchDriver = "gpu.example.com"

type workload struct {
	classes map[string]*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	nodes   []*corev1.Node
	inUse   *InUse
	claims  []*resourceapi.ResourceClaim
}

func benchClass() *resourceapi.DeviceClass {
	return mkClass("gpu", `device.driver == "`+benchDriver+`"`)
}

// gpuNodes makes nodes with one slice each of perNode GPUs with model,
// memory and numa attributes (numa alternating 0, 1 in pairs).
func gpuNodes(numNodes, perNode int) ([]*corev1.Node, []*resourceapi.ResourceSlice) {
	var nodes []*corev1.Node
	var slices []*resourceapi.ResourceSlice
	for n := 0; n < numNodes; n++ {
		name := fmt.Sprintf("node-%04d", n)
		nodes = append(nodes, mkNode(name, "zone=z"+fmt.Sprint(n%3)))
		devs := make([]resourceapi.Device, perNode)
		for d := range devs {
			devs[d] = mkDev(fmt.Sprintf("gpu-%d", d), attr("model", []string{"a100", "h100"}[d%2]), intAttr("memory", int64(40*(1+d%2))), intAttr("numa", int64(d/(perNode/2))))
		}
		s := mkSlice(name, name, devs)
		s.Spec.Driver = benchDriver
		slices = append(slices, s)
	}
	return nodes, slices
}

func useDevices(u *InUse, slices []*resourceapi.ResourceSlice, perNode int, skip func(n, d int) bool) {
	for n, s := range slices {
		for d := 0; d < perNode; d++ {
			if skip(n, d) {
				continue
			}
			u.AddAllocation(&resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "old", Driver: benchDriver, Pool: s.Spec.Pool.Name, Device: s.Spec.Devices[d].Name}}}})
		}
	}
}

func simpleWorkload(numNodes, perNode int, fill string) workload {
	nodes, slices := gpuNodes(numNodes, perNode)
	u := NewInUse()
	switch fill {
	case "half":
		useDevices(u, slices, perNode, func(n, d int) bool { return d >= perNode/2 })
	case "fullButOne":
		useDevices(u, slices, perNode, func(n, d int) bool { return n == numNodes/2 && d == perNode-1 })
	case "inOrder":
		// As MostAllocated fills nodes sorted by name: the first half
		// full, the next node partly, the rest empty.
		useDevices(u, slices, perNode, func(n, d int) bool { return n > numNodes/2 || n == numNodes/2 && d >= perNode/2 })
	}
	return workload{
		classes: classes(benchClass()), slices: slices, nodes: nodes, inUse: u,
		claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("gpu", "gpu", 1))},
	}
}

func celWorkload() workload {
	w := simpleWorkload(500, 8, "half")
	w.claims = []*resourceapi.ResourceClaim{mkClaim("c", mkReq("gpu", "gpu", 1,
		selector(`device.attributes["`+benchDriver+`"].model == "h100" && device.attributes["`+benchDriver+`"].memory >= 80`)))}
	return w
}

func matchAttributeWorkload() workload {
	w := simpleWorkload(500, 8, "")
	// One device per numa half is in use, so each node has 3+3 free and no
	// numa group of 4: only node-0250 has a whole numa group free.
	useDevices(w.inUse, w.slices, 8, func(n, d int) bool { return n == 250 || (d != 0 && d != 4) })
	c := mkClaim("c", mkReq("gpu", "gpu", 4))
	w.claims = []*resourceapi.ResourceClaim{withConstraint(c, true, benchDriver+"/numa")}
	return w
}

// partitionableWorkload: per node two GPUs, each published as one whole
// device, two halves and four quarters sharing one counter set; half of the
// nodes have a quarter of gpu0 in use. The claim asks for a quarter.
func partitionableWorkload(numNodes int) workload {
	var nodes []*corev1.Node
	var slices []*resourceapi.ResourceSlice
	u := NewInUse()
	for n := 0; n < numNodes; n++ {
		name := fmt.Sprintf("node-%04d", n)
		nodes = append(nodes, mkNode(name))
		var devs []resourceapi.Device
		var opts []sliceOpt
		for g := 0; g < 2; g++ {
			set := fmt.Sprintf("gpu%d", g)
			devs = append(devs, mkDev(set+"-whole", attr("size", "whole"), consumes(set, "memory", 80)))
			for h := 0; h < 2; h++ {
				devs = append(devs, mkDev(fmt.Sprintf("%s-half%d", set, h), attr("size", "half"), consumes(set, "memory", 40)))
			}
			for q := 0; q < 4; q++ {
				devs = append(devs, mkDev(fmt.Sprintf("%s-quarter%d", set, q), attr("size", "quarter"), consumes(set, "memory", 20)))
			}
			opts = append(opts, counterSet(set, map[string]int64{"memory": 80}))
		}
		s := mkSlice(name, name, devs, opts...)
		s.Spec.Driver = benchDriver
		slices = append(slices, split(s)...)
		if n%2 == 0 {
			u.AddAllocation(&resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "old", Driver: benchDriver, Pool: name, Device: "gpu0-quarter0"}}}})
		}
	}
	return workload{
		classes: classes(benchClass()), slices: slices, nodes: nodes, inUse: u,
		claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("gpu", "gpu", 1, selector(`device.attributes["`+benchDriver+`"].size == "quarter"`)))},
	}
}

func benchmarkSelectNode(b *testing.B, w workload, cold bool) {
	a := New(Options{NewShareID: func() types.UID { return "share" }})
	inv := a.Prepare(Snapshot{Classes: w.classes, Slices: w.slices})
	ctx := context.Background()
	// Warm the per-node and per-expression caches, as a running
	// controller's would be.
	sel, err := a.SelectNode(ctx, inv.State(w.inUse), w.claims, w.nodes)
	if err != nil {
		b.Fatal(err)
	}
	if sel.Chosen == nil {
		b.Fatalf("no node fits: %s", sel.Summary())
	}
	st := inv.State(w.inUse)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if cold {
			inv = a.Prepare(Snapshot{Classes: w.classes, Slices: w.slices})
			st = inv.State(w.inUse)
		}
		if _, err := a.SelectNode(ctx, st, w.claims, w.nodes); err != nil {
			b.Fatal(err)
		}
	}
}

var workloads = []struct {
	name string
	make func() workload
}{
	{"500x8/empty", func() workload { return simpleWorkload(500, 8, "") }},
	{"500x8/halfFull", func() workload { return simpleWorkload(500, 8, "half") }},
	{"500x8/fullButOne", func() workload { return simpleWorkload(500, 8, "fullButOne") }},
	{"5000x8/halfFull", func() workload { return simpleWorkload(5000, 8, "half") }},
	{"5000x8/inOrder", func() workload { return simpleWorkload(5000, 8, "inOrder") }},
	{"500x8/celSelector", celWorkload},
	{"500x8/matchAttribute4", matchAttributeWorkload},
	{"500x14/partitionable", func() workload { return partitionableWorkload(500) }},
}

// BenchmarkSelectNode reuses the prepared inventory, as the controller does
// while no ResourceSlice or class changes, and the state of what is in use,
// which the controller keeps current with State.AddAllocation.
func BenchmarkSelectNode(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) { benchmarkSelectNode(b, w.make(), false) })
	}
}

// BenchmarkChooseNode is BenchmarkSelectNode with ChooseNode, which
// passes over nodes that cannot fit or cannot be chosen.
func BenchmarkChooseNode(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) { benchmarkChooseNode(b, w.make()) })
	}
}

func benchmarkChooseNode(b *testing.B, w workload) {
	a := New(Options{NewShareID: func() types.UID { return "share" }})
	inv := a.Prepare(Snapshot{Classes: w.classes, Slices: w.slices})
	ctx := context.Background()
	st := inv.State(w.inUse)
	sel, err := a.ChooseNode(ctx, st, w.claims, w.nodes)
	if err != nil {
		b.Fatal(err)
	}
	if sel.Chosen == nil {
		b.Fatalf("no node fits: %s", sel.Summary())
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.ChooseNode(ctx, st, w.claims, w.nodes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelectNodeCold also prepares the inventory and the state for
// every pod, so it includes grouping the pools and evaluating the selectors
// on the devices.
func BenchmarkSelectNodeCold(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) { benchmarkSelectNode(b, w.make(), true) })
	}
}

// BenchmarkOneNode is the cost of one node check. allocate: a one-shot
// Allocate, plan and AllocationResults included, the unit the upstream
// allocator is called with. check: Check.Fits of a pod planned once
// (NewCheck), as SelectNode checks each node, without the results.
func BenchmarkOneNode(b *testing.B) {
	w := simpleWorkload(500, 8, "half")
	a := New(Options{})
	st := a.Prepare(Snapshot{Classes: w.classes, Slices: w.slices}).State(w.inUse)
	ctx := context.Background()
	node := w.nodes[17]
	check, err := a.NewCheck(ctx, st, w.claims)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func() (bool, error)
	}{
		{"allocate", func() (bool, error) {
			res, err := a.Allocate(ctx, st, w.claims, node)
			return res.Fits(), err
		}},
		{"check", func() (bool, error) {
			ok, _, err := check.Fits(node)
			return ok, err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if ok, err := tc.run(); err != nil || !ok {
				b.Fatalf("fits=%v, err=%v", ok, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkState is the cost of folding what is in use into an inventory,
// once per scheduling round.
func BenchmarkState(b *testing.B) {
	for _, numNodes := range []int{500, 5000} {
		b.Run(fmt.Sprintf("%dx8/halfFull", numNodes), func(b *testing.B) {
			w := simpleWorkload(numNodes, 8, "half")
			inv := New(Options{}).Prepare(Snapshot{Classes: w.classes, Slices: w.slices})
			b.ReportAllocs()
			for b.Loop() {
				inv.State(w.inUse)
			}
		})
	}
}
