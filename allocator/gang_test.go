package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// gangInstance is a small cluster of nodes with node-local devices and a
// gang whose members each have their own claims.
type gangInstance struct {
	classes  map[string]*resourceapi.DeviceClass
	slices   []*resourceapi.ResourceSlice
	prior    []*resourceapi.AllocationResult
	nodes    []*corev1.Node
	members  [][]*resourceapi.ResourceClaim
	minCount int
	key      string
}

func (g *gangInstance) request() GangRequest {
	req := GangRequest{MinCount: g.minCount, TopologyKey: g.key}
	for m, claims := range g.members {
		req.Members = append(req.Members, GangMember{Name: fmt.Sprintf("ns/pod-%d", m), Claims: claims, Nodes: g.nodes})
	}
	return req
}

func (g *gangInstance) place(t *testing.T, a *Allocator, greedy bool) GangResult {
	t.Helper()
	inv := a.Prepare(Snapshot{Classes: g.classes, Slices: g.slices})
	u := NewInUse()
	for _, p := range g.prior {
		u.AddAllocation(p)
	}
	req := g.request()
	req.Greedy = greedy
	result, err := a.PlaceGang(context.Background(), inv.State(u), u, req)
	if err != nil {
		t.Fatal(err)
	}
	return result
}

// onNode is the single-node instance of the given members' claims on a
// node, for the oracle and the checker.
func (g *gangInstance) onNode(node *corev1.Node, members []int) *instance {
	in := &instance{classes: g.classes, slices: g.slices, prior: g.prior, node: node}
	for _, m := range members {
		in.claims = append(in.claims, g.members[m]...)
	}
	return in
}

// bruteForce tries every assignment of members to nodes (or to none) with
// at least minCount placed, asking the exhaustive oracle whether each
// node can hold its members' claims together. Devices are node-local, so
// nodes do not affect each other. It reports whether one exists and
// whether one exists within a single domain of the key.
func (g *gangInstance) bruteForce() bool {
	n := len(g.members)
	assign := make([]int, n) // node index, or -1
	memo := map[string]bool{}
	feasible := func(node int, members []int) bool {
		k := fmt.Sprint(node, members)
		if v, ok := memo[k]; ok {
			return v
		}
		v := oracleFeasible(g.onNode(g.nodes[node], members))
		memo[k] = v
		return v
	}
	check := func() bool {
		placed := 0
		domain := ""
		byNode := map[int][]int{}
		for m, node := range assign {
			if node < 0 {
				continue
			}
			placed++
			byNode[node] = append(byNode[node], m)
			if g.key != "" {
				value, ok := g.nodes[node].Labels[g.key]
				if !ok || (domain != "" && value != domain) {
					return false
				}
				domain = value
			}
		}
		if placed < g.minCount {
			return false
		}
		for node, members := range byNode {
			if !feasible(node, members) {
				return false
			}
		}
		return true
	}
	var rec func(m int) bool
	rec = func(m int) bool {
		if m == n {
			return check()
		}
		for node := -1; node < len(g.nodes); node++ {
			assign[m] = node
			if rec(m + 1) {
				return true
			}
		}
		return false
	}
	return rec(0)
}

// validate checks a placement: enough members, each node's allocations
// valid for its members' claims by the independent checker, one domain.
func (g *gangInstance) validate(result GangResult) error {
	if len(result.Placements) < g.minCount {
		return fmt.Errorf("%d members placed, want at least %d", len(result.Placements), g.minCount)
	}
	byNode := map[string][]GangPlacement{}
	domain := ""
	for _, p := range result.Placements {
		byNode[p.Node] = append(byNode[p.Node], p)
	}
	for _, node := range g.nodes {
		placements := byNode[node.Name]
		if len(placements) == 0 {
			continue
		}
		if g.key != "" {
			value, ok := node.Labels[g.key]
			if !ok || (domain != "" && value != domain) {
				return fmt.Errorf("node %s is outside domain %s", node.Name, domain)
			}
			domain = value
		}
		var members []int
		var allocs []*resourceapi.AllocationResult
		for _, p := range placements {
			members = append(members, p.Member)
			allocs = append(allocs, p.Allocations...)
		}
		if err := newRefWorld(g.onNode(node, members)).check(allocs); err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
	}
	return nil
}

// randomGang builds a small instance: 2-3 nodes in 1-2 racks with 1-4
// devices of models a and b, some of them used already, and 2-4 members
// with one or two claims asking for 1-2 devices of a model or any.
func randomGang(seed uint64) *gangInstance {
	r := rand.New(rand.NewPCG(seed, 0x9a46))
	g := &gangInstance{classes: classes(mkClass("gpu", "true"))}
	numNodes := 2 + r.IntN(2)
	for i := 0; i < numNodes; i++ {
		name := fmt.Sprintf("n%d", i)
		g.nodes = append(g.nodes, mkNode(name, fmt.Sprintf("rack=r%d", r.IntN(2))))
		var devices []resourceapi.Device
		for d := 0; d < 1+r.IntN(4); d++ {
			devices = append(devices, mkDev(fmt.Sprintf("d%d", d), attr("model", []string{"a", "b"}[r.IntN(2)])))
			if r.IntN(6) == 0 {
				g.prior = append(g.prior, used(name+"/"+fmt.Sprintf("d%d", d))...)
			}
		}
		g.slices = append(g.slices, mkSlice(name, name, devices))
	}
	numMembers := 2 + r.IntN(3)
	g.minCount = 1 + r.IntN(numMembers)
	for m := 0; m < numMembers; m++ {
		var claims []*resourceapi.ResourceClaim
		for c := 0; c < 1+r.IntN(2); c++ {
			var opts []reqOpt
			switch r.IntN(3) {
			case 0:
				opts = append(opts, selector("model=a"))
			case 1:
				opts = append(opts, selector("model=b"))
			}
			claim := mkClaim(fmt.Sprintf("m%d-c%d", m, c), mkReq("r", "gpu", int64(1+r.IntN(2)), opts...))
			claim.UID = types.UID(claim.Name)
			claims = append(claims, claim)
		}
		g.members = append(g.members, claims)
	}
	if r.IntN(3) == 0 {
		g.key = "rack"
	}
	return g
}

// TestPlaceGangAgainstBruteForce: on random small instances every
// placement found is valid, and one is found whenever the brute force
// finds one. The greedy, member-by-member variant is run alongside and
// counted: it must never find more, and on some instances it finds less.
func TestPlaceGangAgainstBruteForce(t *testing.T) {
	a := newTestAllocator()
	const instances = 3000
	feasible, greedyMissed, failures := 0, 0, 0
	for seed := uint64(0); seed < instances; seed++ {
		g := randomGang(seed)
		want := g.bruteForce()
		got := g.place(t, a, false)
		greedy := g.place(t, a, true)
		var problem string
		switch {
		case got.Placements != nil && !want:
			problem = "placed, brute force finds no placement"
		case got.Placements == nil && want:
			problem = "not placed, brute force finds a placement: " + got.Reason
		case got.BudgetExhausted:
			problem = "budget exhausted on a small instance"
		}
		if got.Placements != nil {
			if err := g.validate(got); err != nil {
				problem = "invalid placement: " + err.Error()
			}
		}
		if greedy.Placements != nil {
			if err := g.validate(greedy); err != nil {
				problem = "invalid greedy placement: " + err.Error()
			}
		}
		if greedy.Placements != nil && !want {
			problem = "greedy placed, brute force finds no placement"
		}
		if problem != "" {
			failures++
			if failures <= 10 {
				t.Errorf("seed %d: %s", seed, problem)
			}
		}
		if want {
			feasible++
			if greedy.Placements == nil {
				greedyMissed++
			}
		}
	}
	t.Logf("%d instances, %d feasible by brute force, all of them placed; member-by-member placement missed %d of them", instances, feasible, greedyMissed)
	// The instances must exercise both outcomes and the backtracking.
	if feasible < instances/5 || feasible > instances*9/10 {
		t.Errorf("%d of %d instances feasible: the generator no longer tests both outcomes", feasible, instances)
	}
	if greedyMissed == 0 {
		t.Errorf("member-by-member placement found every feasible gang: the instances do not need backtracking")
	}
}

// backtrackingNeeded: a node with an 80 GiB and a 40 GiB GPU (in that
// order); pod-0 takes any GPU, pod-1 needs the big one. Placed one after
// the other, pod-0 takes the first GPU, the big one, and pod-1 cannot be
// placed; searched together, pod-0 takes the small one.
func backtrackingNeeded() *gangInstance {
	g := &gangInstance{classes: classes(mkClass("gpu", "true")), minCount: 2}
	g.nodes = []*corev1.Node{mkNode("n0")}
	g.slices = []*resourceapi.ResourceSlice{mkSlice("n0", "n0", []resourceapi.Device{mkDev("gpu-0", attr("memory", "80Gi")), mkDev("gpu-1", attr("memory", "40Gi"))})}
	anyGPU := mkClaim("pod-0-gpu", mkReq("gpu", "gpu", 1))
	bigGPU := mkClaim("pod-1-gpu", mkReq("gpu", "gpu", 1, selector("memory=80Gi")))
	anyGPU.UID, bigGPU.UID = "any", "big"
	g.members = [][]*resourceapi.ResourceClaim{{anyGPU}, {bigGPU}}
	return g
}

// TestPlaceGangBacktracking: the gang fits only when the first member's
// device is chosen again after the second member fails; member-by-member
// placement (Greedy) fails on it.
func TestPlaceGangBacktracking(t *testing.T) {
	a := newTestAllocator()
	g := backtrackingNeeded()
	if !g.bruteForce() {
		t.Fatal("the instance has no placement")
	}
	greedy := g.place(t, a, true)
	if greedy.Placements != nil {
		t.Fatalf("member-by-member placement fits: %+v; the instance does not need backtracking", greedy.Placements)
	}
	if !strings.Contains(greedy.Reason, "pod ns/pod-1") {
		t.Errorf("greedy reason %q does not name pod-1", greedy.Reason)
	}
	got := g.place(t, a, false)
	if got.Placements == nil {
		t.Fatalf("not placed: %s", got.Reason)
	}
	if err := g.validate(got); err != nil {
		t.Fatal(err)
	}
	if device := got.Placements[0].Allocations[0].Devices.Results[0].Device; device != "gpu-1" {
		t.Errorf("pod-0 got %s, want gpu-1 (the 40Gi one)", device)
	}
}

// TestPlaceGangTopology: rack r0 has two nodes with 4 free GPUs each, rack
// r1 three nodes with 3 free GPUs each (more in total). A gang of two pods
// with 4 GPUs each fits only in r0.
func TestPlaceGangTopology(t *testing.T) {
	a := newTestAllocator()
	g := &gangInstance{classes: classes(mkClass("gpu", "true")), minCount: 2, key: "rack"}
	add := func(name, rack string, devices int) {
		g.nodes = append(g.nodes, mkNode(name, "rack="+rack))
		g.slices = append(g.slices, mkSlice(name, name, devs(numbered("gpu-", devices)...)))
	}
	add("a-0", "r1", 3)
	add("a-1", "r1", 3)
	add("a-2", "r1", 3)
	add("b-0", "r0", 4)
	add("b-1", "r0", 4)
	for m := 0; m < 2; m++ {
		claim := mkClaim(fmt.Sprintf("pod-%d-gpus", m), mkReq("gpus", "gpu", 4))
		claim.UID = types.UID(claim.Name)
		g.members = append(g.members, []*resourceapi.ResourceClaim{claim})
	}
	got := g.place(t, a, false)
	if got.Placements == nil {
		t.Fatalf("not placed: %s", got.Reason)
	}
	if got.Domain != "r0" {
		t.Errorf("domain %q, want r0", got.Domain)
	}
	if err := g.validate(got); err != nil {
		t.Fatal(err)
	}

	// Three such pods fit nowhere; the reason names the key.
	claim := mkClaim("pod-2-gpus", mkReq("gpus", "gpu", 4))
	claim.UID = "pod-2"
	g.members = append(g.members, []*resourceapi.ResourceClaim{claim})
	g.minCount = 3
	got = g.place(t, a, false)
	if got.Placements != nil {
		t.Fatalf("placed three pods of 4 GPUs: %+v", got.Placements)
	}
	if !strings.Contains(got.Reason, "rack") {
		t.Errorf("reason %q does not name the topology key", got.Reason)
	}
}

// TestPlaceGangBudget: a gang that cannot fit stops at the budget.
func TestPlaceGangBudget(t *testing.T) {
	a := newTestAllocator()
	g := &gangInstance{classes: classes(mkClass("gpu", "true"))}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("n%d", i)
		g.nodes = append(g.nodes, mkNode(name))
		g.slices = append(g.slices, mkSlice(name, name, devs(numbered("gpu-", 3)...)))
	}
	// Members of different sizes defeat the symmetry rule: 2, 2, 2, ...
	for m := 0; m < 10; m++ {
		claim := mkClaim(fmt.Sprintf("pod-%d", m), mkReq("gpus", "gpu", int64(2+m%2)))
		claim.UID = types.UID(claim.Name)
		g.members = append(g.members, []*resourceapi.ResourceClaim{claim})
	}
	g.minCount = 10
	req := g.request()
	req.Budget = 200
	inv := a.Prepare(Snapshot{Classes: g.classes, Slices: g.slices})
	u := NewInUse()
	result, err := a.PlaceGang(context.Background(), inv.State(u), u, req)
	if err != nil {
		t.Fatal(err)
	}
	if result.Placements != nil || !result.BudgetExhausted || result.Steps > 200 {
		t.Errorf("placed %v, budget exhausted %v after %d steps; want no placement, exhausted within 200", result.Placements != nil, result.BudgetExhausted, result.Steps)
	}
}

// TestPlaceGangSharedClaim: a claim shared by every member (a PodGroup's
// claim), each member bringing its own copy of it as the allocation
// controller converts it per pod, is allocated once, with the first
// member; the others go where its device is reachable. The shared device
// sits in a pool for the nodes of rack r1 only, so all members go there.
func TestPlaceGangSharedClaim(t *testing.T) {
	a := newTestAllocator()
	g := &gangInstance{classes: classes(mkClass("gpu", "kind=gpu"), mkClass("fabric", "kind=fabric")), minCount: 3}
	for i, rack := range []string{"r0", "r0", "r1", "r1"} {
		name := fmt.Sprintf("n-%d", i)
		g.nodes = append(g.nodes, mkNode(name, "rack="+rack))
		g.slices = append(g.slices, mkSlice(name, name, []resourceapi.Device{mkDev("gpu-0", attr("kind", "gpu")), mkDev("gpu-1", attr("kind", "gpu"))}))
	}
	g.slices = append(g.slices, mkSlice("fabric", "", []resourceapi.Device{mkDev("fabric-0", attr("kind", "fabric"))}, labelSelector("rack", "r1")))
	for m := 0; m < 4; m++ {
		shared := mkClaim("group-fabric", mkReq("fabric", "fabric", 1))
		shared.UID = "group-fabric"
		own := mkClaim(fmt.Sprintf("pod-%d-gpu", m), mkReq("gpus", "gpu", 1))
		own.UID = types.UID(own.Name)
		g.members = append(g.members, []*resourceapi.ResourceClaim{shared, own})
	}
	got := g.place(t, a, false)
	if got.Placements == nil {
		t.Fatalf("not placed: %s", got.Reason)
	}
	if len(got.Placements) != 4 {
		t.Errorf("%d members placed, want 4", len(got.Placements))
	}
	allocated := 0
	for _, p := range got.Placements {
		if p.Node != "n-2" && p.Node != "n-3" {
			t.Errorf("member %d on %s, outside rack r1 where the shared device is", p.Member, p.Node)
		}
		if p.Allocations[0] != nil {
			allocated++
			if device := p.Allocations[0].Devices.Results[0].Device; device != "fabric-0" {
				t.Errorf("shared claim got %s, want fabric-0", device)
			}
		}
	}
	if allocated != 1 {
		t.Errorf("shared claim allocated %d times, want once", allocated)
	}
}
