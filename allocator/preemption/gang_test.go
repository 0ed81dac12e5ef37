package preemption

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestFindGangPlace: with GangPlace, a gang's victims are chosen for a
// placement that keeps its topology key and places only minCount
// members. Four nodes of one GPU in racks a and b, each GPU held by a
// low pod; the cheapest two victims (a1 and b1) are in two racks. A gang
// of three one-GPU members with minCount 2 and the rack key needs two
// victims of one rack; placing every member one by one would evict three,
// across the racks.
func TestFindGangPlace(t *testing.T) {
	racks := map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
	s := newScenario(t, nodeSlice("a1", 1), nodeSlice("a2", 1), nodeSlice("b1", 1), nodeSlice("b2", 1))
	var nodes []*corev1.Node
	for _, name := range []string{"a1", "a2", "b1", "b2"} {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": racks[name]}}})
	}
	for name, priority := range map[string]int32{"a1": 10, "a2": 50, "b1": 20, "b2": 30} {
		if !s.run("on-"+name, priority, name, gpuClaim("on-"+name, 1, false)) {
			t.Fatalf("on-%s does not fit", name)
		}
	}
	preemptor := &Preemptor{Priority: 100}
	req := allocator.GangRequest{MinCount: 2, TopologyKey: "rack"}
	for _, name := range []string{"m0", "m1", "m2"} {
		claims := []*resourceapi.ResourceClaim{gpuClaim(name, 1, false)}
		preemptor.Members = append(preemptor.Members, Member{Key: "default/" + name, Claims: claims, Nodes: nodes})
		req.Members = append(req.Members, allocator.GangMember{Name: "default/" + name, Claims: claims, Nodes: nodes})
	}
	preemptor.Place = GangPlace(s.alloc, req)
	d, err := Find(context.Background(), s.cluster(), preemptor, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Possible || len(d.Victims) != 2 {
		t.Fatalf("possible %v, victims %v (%s), want two", d.Possible, keys(d.Victims), d.Reason)
	}
	victimRacks := map[string]bool{}
	for _, v := range d.Victims {
		victimRacks[racks[v.Node]] = true
	}
	placedRacks := map[string]bool{}
	placed := 0
	for _, p := range d.Placement {
		if p.Node != "" {
			placed++
			placedRacks[racks[p.Node]] = true
		}
	}
	if len(victimRacks) != 1 || len(placedRacks) != 1 || placed != 2 || !slices.Equal(keysOf(victimRacks), keysOf(placedRacks)) {
		t.Errorf("victims %v in racks %v, %d members placed in racks %v: want two victims and two members in one rack", keys(d.Victims), victimRacks, placed, placedRacks)
	}
	// The rack whose pods are the better victims (Better) is chosen.
	a := d.Victims
	for _, rack := range []string{"a", "b"} {
		var other []Pod
		for _, p := range s.pods {
			if racks[p.Node] == rack {
				other = append(other, p)
			}
		}
		slices.SortFunc(other, func(x, y Pod) int {
			if x.Priority != y.Priority {
				return int(x.Priority - y.Priority)
			}
			return strings.Compare(x.Key, y.Key)
		})
		if Better(other, a) {
			t.Errorf("victims %v, but rack %s's %v are better", keys(a), rack, keys(other))
		}
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
