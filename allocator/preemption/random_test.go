package preemption

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

// randomScenario builds a small cluster: 1-3 nodes of 1-4 devices, maybe
// network devices usable from all nodes (only without gangs: the gang
// check below is complete only when the devices of a node are
// interchangeable), and 2-7 pods of priorities 1-5 holding 1-2 devices,
// some through a claim shared with another pod, some with admin access,
// some terminating.
func randomScenario(t testing.TB, rng *rand.Rand, network bool) *scenario {
	var sl []*resourceapi.ResourceSlice
	for i := range 1 + rng.IntN(3) {
		sl = append(sl, nodeSlice(fmt.Sprintf("n%d", i), 1+rng.IntN(4)))
	}
	if network && rng.IntN(2) == 0 {
		sl = append(sl, nodeSlice("", 1+rng.IntN(2)))
	}
	s := newScenario(t, sl...)
	var claims []*resourceapi.ResourceClaim
	for i := range 2 + rng.IntN(6) {
		name := fmt.Sprintf("p%d", i)
		n := s.nodes[rng.IntN(len(s.nodes))].Name
		var use *resourceapi.ResourceClaim
		switch {
		case len(claims) > 0 && rng.IntN(4) == 0:
			use = claims[rng.IntN(len(claims))]
			// A claim allocated on another node's devices cannot be used here.
			if sel := use.Status.Allocation.NodeSelector; sel != nil && !nodeaffinity.NodeSelectorMatches(sel, node(n)) {
				continue
			}
		default:
			use = gpuClaim(name, int64(1+rng.IntN(2)), rng.IntN(8) == 0)
		}
		if s.run(name, int32(1+rng.IntN(5)), n, use) && use.Status.Allocation != nil {
			claims = append(claims, use)
		}
	}
	for i := range s.pods {
		s.pods[i].Terminating = rng.IntN(8) == 0
	}
	return s
}

// bruteForce tries every set of lower-priority pods and returns the best
// by Better, judged on count and priorities only; nil when none fits.
func bruteForce(t testing.TB, s *scenario, p *Preemptor) []Pod {
	var lower []Pod
	terminating := map[types.UID]bool{}
	for _, pod := range s.pods {
		switch {
		case pod.Terminating:
			terminating[pod.UID] = true
		case pod.Priority < p.Priority:
			lower = append(lower, pod)
		}
	}
	// A unit is all in or all out; one with a member that is neither
	// lower nor terminating is out.
	spared := map[string]bool{}
	for _, pod := range s.pods {
		if pod.Unit != "" && !pod.Terminating && pod.Priority >= p.Priority {
			spared[pod.Unit] = true
		}
	}
	var best []Pod
	found := false
masks:
	for mask := 0; mask < 1<<len(lower); mask++ {
		var set []Pod
		gone := maps.Clone(terminating)
		in := map[string]int{}
		for i, pod := range lower {
			if mask&(1<<i) != 0 {
				if spared[pod.Unit] {
					continue masks
				}
				set = append(set, pod)
				gone[pod.UID] = true
				in[pod.Unit]++
			}
		}
		for unit, n := range in {
			if unit == "" {
				continue
			}
			for _, pod := range lower {
				if pod.Unit == unit {
					n--
				}
			}
			if n != 0 {
				continue masks
			}
		}
		SortPods(set)
		if found && comparePriorities(set, best) >= 0 {
			continue
		}
		if placeable(t, s, s.inUseWithout(gone), p.Members) {
			best, found = set, true
		}
	}
	if !found {
		return nil
	}
	if best == nil {
		best = []Pod{}
	}
	return best
}

// comparePriorities is Better without the tie-break on keys.
func comparePriorities(a, b []Pod) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	for i := len(a) - 1; i >= 0; i-- {
		if a[i].Priority != b[i].Priority {
			return int(a[i].Priority) - int(b[i].Priority)
		}
	}
	return 0
}

// placeable tries every assignment of members to nodes, allocating the
// members in order, each on a fresh state.
func placeable(t testing.TB, s *scenario, u *allocator.InUse, members []Member) bool {
	if len(members) == 0 {
		return true
	}
	for _, n := range members[0].Nodes {
		r, err := s.alloc.Allocate(context.Background(), s.inv.State(u), members[0].Claims, n)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Fits() {
			continue
		}
		next := u.Clone()
		for _, a := range r.Allocations {
			next.AddAllocation(a)
		}
		if placeable(t, s, next, members[1:]) {
			return true
		}
	}
	return false
}

// TestFindAgainstBruteForce checks on random small clusters that the
// victims are as few as possible and, among the fewest, of the lowest
// priorities (Better), that they make the preemptor fit, and that Find
// says no exactly when no set of lower-priority pods would do. In every
// other instance some pods form disruption units, which are victims all
// together or not at all.
func TestFindAgainstBruteForce(t *testing.T) {
	const instances = 3000
	seed := uint64(20261128)
	rng := rand.New(rand.NewPCG(seed, seed))
	var possible, impossible, withVictims, gangs, victims int
	for i := range instances {
		gang := i%3 == 2
		s := randomScenario(t, rng, !gang)
		if i%2 == 1 {
			for j := range s.pods {
				if rng.IntN(2) == 0 {
					s.pods[j].Unit = fmt.Sprintf("unit-%d", rng.IntN(2))
				}
			}
		}
		p := &Preemptor{Priority: int32(2 + rng.IntN(5))}
		members := 1
		if gang {
			members = 2 + rng.IntN(2)
			gangs++
		}
		for m := range members {
			p.Members = append(p.Members, Member{
				Key:    fmt.Sprintf("default/new-%d", m),
				Claims: []*resourceapi.ResourceClaim{gpuClaim(fmt.Sprintf("new-%d", m), int64(1+rng.IntN(3)), false)},
				Nodes:  s.nodes,
			})
		}
		want := bruteForce(t, s, p)
		d, err := Find(context.Background(), s.cluster(), p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		describe := func() string {
			out := fmt.Sprintf("instance %d: gang %v, preemptor priority %d, pods:", i, gang, p.Priority)
			for _, pod := range s.pods {
				out += fmt.Sprintf(" %s(%d)@%s", pod.Key, pod.Priority, pod.Node)
				if pod.Unit != "" {
					out += "[" + pod.Unit + "]"
				}
				if pod.Terminating {
					out += "(terminating)"
				}
			}
			for _, c := range s.claims {
				out += fmt.Sprintf("\n  claim %s reserved for %d: %v", c.Name, len(c.Status.ReservedFor), c.Status.Allocation.Devices.Results)
			}
			return out
		}
		if !d.Exact {
			t.Fatalf("%s\nsearch not exact after %d attempts", describe(), d.Attempts)
		}
		if (want != nil) != d.Possible {
			t.Fatalf("%s\nbrute force %v, Find possible %v (reason %q)", describe(), keys(want), d.Possible, d.Reason)
		}
		if want == nil {
			impossible++
			if d.Reason == "" {
				t.Fatalf("%s\nno reason", describe())
			}
			continue
		}
		possible++
		if comparePriorities(d.Victims, want) != 0 {
			t.Fatalf("%s\nvictims %v, brute force %v", describe(), keys(d.Victims), keys(want))
		}
		gone := map[types.UID]bool{}
		for _, pod := range s.pods {
			if pod.Terminating {
				gone[pod.UID] = true
			}
		}
		unitFrees := map[string]bool{}
		for _, v := range d.Victims {
			if v.Priority >= p.Priority || v.Terminating {
				t.Fatalf("%s\nvictim %s of priority %d, terminating %v", describe(), v.Key, v.Priority, v.Terminating)
			}
			gone[v.UID] = true
			unitFrees[v.Unit] = unitFrees[v.Unit] || len(d.FreedBy[v.UID]) > 0
			// A victim that releases nothing could be spared, unless
			// its unit goes for another member.
			if v.Unit == "" && len(d.FreedBy[v.UID]) == 0 {
				t.Fatalf("%s\nvictim %s frees nothing", describe(), v.Key)
			}
		}
		for _, pod := range s.pods {
			if pod.Unit == "" || pod.Terminating {
				continue
			}
			if _, in := unitFrees[pod.Unit]; in && !gone[pod.UID] {
				t.Fatalf("%s\nvictims %v leave %s of their unit %s", describe(), keys(d.Victims), pod.Key, pod.Unit)
			}
			if freed, in := unitFrees[pod.Unit]; in && !freed {
				t.Fatalf("%s\nunit %s of victims %v frees nothing", describe(), pod.Unit, keys(d.Victims))
			}
		}
		if !placeable(t, s, s.inUseWithout(gone), p.Members) {
			t.Fatalf("%s\nvictims %v do not make room", describe(), keys(d.Victims))
		}
		if len(d.Placement) != members {
			t.Fatalf("%s\nplacement of %d members, want %d", describe(), len(d.Placement), members)
		}
		if len(d.Victims) > 0 {
			withVictims++
			victims += len(d.Victims)
		}
	}
	t.Logf("%d random instances (seed %d, %d gangs) checked against brute force: %d possible (%d needing %d victims in all), %d impossible",
		instances, seed, gangs, possible, withVictims, victims, impossible)
}
