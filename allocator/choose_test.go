package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// sameChoice fails the test unless ChooseNode chose what SelectNode
// chose, with the same score and allocations, and is SelectNode's whole
// answer when no node fits.
func sameChoice(t *testing.T, what string, selected, chosen Selection) {
	t.Helper()
	if selected.Chosen == nil {
		if !reflect.DeepEqual(chosen, selected) {
			t.Fatalf("%s: nothing fits; ChooseNode %s, SelectNode %s", what, chosen.Summary(), selected.Summary())
		}
		return
	}
	if chosen.Chosen == nil || chosen.Chosen.Node != selected.Chosen.Node || chosen.Score != selected.Score ||
		!reflect.DeepEqual(chosen.Chosen.Allocations, selected.Chosen.Allocations) {
		t.Fatalf("%s: ChooseNode %s (score %v), SelectNode %s (score %v)", what, chosen.Summary(), chosen.Score, selected.Summary(), selected.Score)
	}
	if len(chosen.Rejected) != 0 {
		t.Fatalf("%s: ChooseNode explained %d rejected nodes", what, len(chosen.Rejected))
	}
}

// TestChooseNodeOracleInstances: on the oracle's random instances, with
// both node orders and both policies, ChooseNode and SelectNode agree.
func TestChooseNodeOracleInstances(t *testing.T) {
	n2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"zone": "z2"}}}
	for _, policy := range []Policy{MostAllocated, LeastAllocated} {
		a := New(Options{Policy: policy, Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "share" }})
		for seed := uint64(0); seed < 3000; seed++ {
			in := randomInstance(seed)
			inv := a.Prepare(in.snapshot())
			st := inv.State(in.inUse())
			for _, nodes := range [][]*corev1.Node{{in.node, n2}, {n2, in.node}} {
				selected, err := a.SelectNode(context.Background(), st, in.claims, nodes)
				if err != nil {
					t.Fatal(err)
				}
				chosen, err := a.ChooseNode(context.Background(), st, in.claims, nodes)
				if err != nil {
					t.Fatal(err)
				}
				sameChoice(t, fmt.Sprintf("policy %d seed %d order %s", policy, seed, nodes[0].Name), selected, chosen)
			}
		}
	}
}

// TestChooseNodeManyNodes: many nodes filled at random (and in name order,
// as the allocation controller fills them), claims of several shapes,
// nodes in name order and shuffled: ChooseNode and SelectNode agree, and
// ChooseNode passes over nodes.
func TestChooseNodeManyNodes(t *testing.T) {
	const numNodes, perNode = 60, 8
	nodes, gpuSlices := gpuNodes(numNodes, perNode)
	// Eight nodes of shared GPUs: two picks may take one of them.
	for n := range 8 {
		name := fmt.Sprintf("shared-%d", n)
		nodes = append(nodes, mkNode(name))
		var devices []resourceapi.Device
		for d := range 4 {
			devices = append(devices, mkDev(fmt.Sprintf("gpu-%d", d), shared("memory", 80, nil)))
		}
		s := mkSlice(name, name, devices)
		s.Spec.Driver = benchDriver
		gpuSlices = append(gpuSlices, s)
	}
	h100 := `device.attributes["` + benchDriver + `"].model == "h100"`
	claimSets := map[string][]*resourceapi.ResourceClaim{
		"one":             {mkClaim("c", mkReq("gpu", "gpu", 1))},
		"two":             {mkClaim("c", mkReq("gpu", "gpu", 2))},
		"selector":        {mkClaim("c", mkReq("gpu", "gpu", 1, selector(h100)))},
		"two claims":      {mkClaim("c", mkReq("gpu", "gpu", 1)), mkClaim("d", mkReq("a", "gpu", 2), mkReq("b", "gpu", 1))},
		"first of 4 or 2": {mkClaim("c", firstAvailable("gpu", sub("four", "gpu", 4), sub("two", "gpu", 2)))},
		"all":             {mkClaim("c", mkReq("gpu", "gpu", 0, allMode()))},
		"admin":           {mkClaim("c", mkReq("gpu", "gpu", 1, admin()))},
		"capacity":        {mkClaim("c", mkReq("gpu", "gpu", 1, capacityReq("memory", 30)))},
		"too many":        {mkClaim("c", mkReq("gpu", "gpu", perNode+1))},
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range claimSets {
			if !yield(name) {
				return
			}
		}
	})
	passedOver := 0
	for _, policy := range []Policy{MostAllocated, LeastAllocated} {
		a := New(Options{Policy: policy, NewShareID: func() types.UID { return "share" }})
		inv := a.Prepare(Snapshot{Classes: classes(benchClass()), Slices: gpuSlices})
		for seed := range uint64(40) {
			r := rand.New(rand.NewPCG(seed, 7))
			u := NewInUse()
			fill := r.IntN(3)
			for n, s := range gpuSlices {
				for d := range s.Spec.Devices {
					var busy bool
					switch fill {
					case 0: // at random
						busy = r.IntN(3) == 0
					case 1: // the first nodes full, then one partly
						busy = n < int(seed)%numNodes || n == int(seed)%numNodes && d < int(seed)%perNode
					}
					if !busy {
						continue
					}
					result := resourceapi.DeviceRequestAllocationResult{Request: "old", Driver: benchDriver, Pool: s.Spec.Pool.Name, Device: s.Spec.Devices[d].Name}
					if s.Spec.Devices[d].AllowMultipleAllocations != nil {
						result.ShareID = new(types.UID("old"))
						result.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": qty(40)}
					}
					u.AddAllocation(&resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result}}})
				}
			}
			st := inv.State(u)
			shuffled := slices.Clone(nodes)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for _, name := range names {
				for order, list := range map[string][]*corev1.Node{"by name": nodes, "shuffled": shuffled} {
					what := fmt.Sprintf("policy %d seed %d fill %d claims %q nodes %s", policy, seed, fill, name, order)
					selected, err := a.SelectNode(context.Background(), st, claimSets[name], list)
					if err != nil {
						t.Fatal(err)
					}
					chosen, err := a.ChooseNode(context.Background(), st, claimSets[name], list)
					if err != nil {
						t.Fatal(err)
					}
					sameChoice(t, what, selected, chosen)
					passedOver += selected.searched - chosen.searched
				}
			}
		}
	}
	t.Logf("ChooseNode passed over %d nodes", passedOver)
	if passedOver == 0 {
		t.Error("ChooseNode never passed over a node")
	}
}
