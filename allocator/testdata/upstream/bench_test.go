package upstreamcompare

// Upstream k8s.io/dynamic-resource-allocation/structured v0.37.2 on the same
// workloads as draplane's allocator/bench_test.go: one pod, NewAllocator once
// (as the scheduler does per pod), then Allocate on every node until the
// end, keeping the results of the fitting nodes (the scheduler runs Filter
// on all nodes).

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

const driver = "gpu.example.com"

type lister map[string]*resourceapi.DeviceClass

func (l lister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}
func (l lister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("no class %s", name)
}

func ptr[T any](v T) *T { return &v }

func str(v string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &v} }
func num(v int64) resourceapi.DeviceAttribute  { return resourceapi.DeviceAttribute{IntValue: &v} }

type workload struct {
	classes lister
	slices  []*resourceapi.ResourceSlice
	nodes   []*v1.Node
	used    sets.Set[structured.DeviceID]
	claims  []*resourceapi.ResourceClaim
}

func class() lister {
	return lister{"gpu": {ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}}
}

func claim(count int64, selector string) *resourceapi.ResourceClaim {
	r := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	if selector != "" {
		r.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
	}
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{r}}}}
}

func gpuNodes(numNodes, perNode int) ([]*v1.Node, []*resourceapi.ResourceSlice) {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	for n := 0; n < numNodes; n++ {
		name := fmt.Sprintf("node-%04d", n)
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "z" + fmt.Sprint(n%3)}}})
		devs := make([]resourceapi.Device, perNode)
		for d := range devs {
			devs[d] = resourceapi.Device{Name: fmt.Sprintf("gpu-%d", d), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model": str([]string{"a100", "h100"}[d%2]), "memory": num(int64(40 * (1 + d%2))), "numa": num(int64(d / (perNode / 2)))}}
		}
		slices = append(slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + name},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}, NodeName: &name, Devices: devs}})
	}
	return nodes, slices
}

func use(u sets.Set[structured.DeviceID], slices []*resourceapi.ResourceSlice, perNode int, skip func(n, d int) bool) {
	for n, s := range slices {
		for d := 0; d < perNode; d++ {
			if !skip(n, d) {
				u.Insert(structured.MakeDeviceID(driver, s.Spec.Pool.Name, s.Spec.Devices[d].Name))
			}
		}
	}
}

func simple(numNodes, perNode int, fill string) workload {
	nodes, slices := gpuNodes(numNodes, perNode)
	u := sets.New[structured.DeviceID]()
	switch fill {
	case "half":
		use(u, slices, perNode, func(n, d int) bool { return d >= perNode/2 })
	case "fullButOne":
		use(u, slices, perNode, func(n, d int) bool { return n == numNodes/2 && d == perNode-1 })
	}
	return workload{classes: class(), slices: slices, nodes: nodes, used: u, claims: []*resourceapi.ResourceClaim{claim(1, "")}}
}

func celW() workload {
	w := simple(500, 8, "half")
	w.claims = []*resourceapi.ResourceClaim{claim(1, `device.attributes["`+driver+`"].model == "h100" && device.attributes["`+driver+`"].memory >= 80`)}
	return w
}

func matchAttr() workload {
	w := simple(500, 8, "")
	use(w.used, w.slices, 8, func(n, d int) bool { return n == 250 || (d != 0 && d != 4) })
	c := claim(4, "")
	c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr(resourceapi.FullyQualifiedName(driver + "/numa"))}}
	w.claims = []*resourceapi.ResourceClaim{c}
	return w
}

func partitionable(numNodes int) workload {
	var nodes []*v1.Node
	var slices []*resourceapi.ResourceSlice
	u := sets.New[structured.DeviceID]()
	q := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
	for n := 0; n < numNodes; n++ {
		name := fmt.Sprintf("node-%04d", n)
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		var devs []resourceapi.Device
		var sets []resourceapi.CounterSet
		for g := 0; g < 2; g++ {
			set := fmt.Sprintf("gpu%d", g)
			mk := func(dn, size string, mem int64) resourceapi.Device {
				return resourceapi.Device{Name: dn, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"size": str(size)},
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: map[string]resourceapi.Counter{"memory": {Value: q(mem)}}}}}
			}
			devs = append(devs, mk(set+"-whole", "whole", 80))
			for h := 0; h < 2; h++ {
				devs = append(devs, mk(fmt.Sprintf("%s-half%d", set, h), "half", 40))
			}
			for k := 0; k < 4; k++ {
				devs = append(devs, mk(fmt.Sprintf("%s-quarter%d", set, k), "quarter", 20))
			}
			sets = append(sets, resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{"memory": {Value: q(80)}}})
		}
		slices = append(slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + name},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 2}, NodeName: &name, Devices: devs}},
			&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + name + "-counters"},
				Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 2}, NodeName: &name, SharedCounters: sets}})
		if n%2 == 0 {
			u.Insert(structured.MakeDeviceID(driver, name, "gpu0-quarter0"))
		}
	}
	return workload{classes: class(), slices: slices, nodes: nodes, used: u,
		claims: []*resourceapi.ResourceClaim{claim(1, `device.attributes["`+driver+`"].size == "quarter"`)}}
}

var features = structured.Features{AdminAccess: true, ConsumableCapacity: true, DeviceBindingAndStatus: true, DeviceTaints: true, PartitionableDevices: true, PrioritizedList: true}

func bench(b *testing.B, w workload) {
	ctx := context.Background()
	celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: true})
	state := structured.AllocatedState{AllocatedDevices: w.used, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	run := func() int {
		a, err := structured.NewAllocator(ctx, features, state, w.classes, w.slices, celCache)
		if err != nil {
			b.Fatal(err)
		}
		fits := 0
		for _, n := range w.nodes {
			res, err := a.Allocate(ctx, n, w.claims)
			if err != nil {
				// Errors that only concern one node (e.g. invalid pools) don't stop the scheduler.
				continue
			}
			if res != nil {
				fits++
			}
		}
		return fits
	}
	if run() == 0 {
		b.Fatal("no node fits")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}

func BenchmarkUpstream(b *testing.B) {
	b.Run("500x8/empty", func(b *testing.B) { bench(b, simple(500, 8, "")) })
	b.Run("500x8/halfFull", func(b *testing.B) { bench(b, simple(500, 8, "half")) })
	b.Run("500x8/fullButOne", func(b *testing.B) { bench(b, simple(500, 8, "fullButOne")) })
	b.Run("5000x8/halfFull", func(b *testing.B) { bench(b, simple(5000, 8, "half")) })
	b.Run("500x8/celSelector", func(b *testing.B) { bench(b, celW()) })
	b.Run("500x8/matchAttribute4", func(b *testing.B) { bench(b, matchAttr()) })
	b.Run("500x14/partitionable", func(b *testing.B) { bench(b, partitionable(500)) })
}
