package preemption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

const driver = "gpu.example.com"

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

// nodeSlice publishes devices on one node; an empty node name publishes
// them for all nodes.
func nodeSlice(nodeName string, devices int) *resourceapi.ResourceSlice {
	pool := nodeName
	if pool == "" {
		pool = "network"
	}
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: pool}}
	s.Spec.Driver = driver
	s.Spec.Pool = resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1}
	if nodeName == "" {
		s.Spec.AllNodes = ptr.To(true)
	} else {
		s.Spec.NodeName = ptr.To(nodeName)
	}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("dev-%d", i)})
	}
	return s
}

func gpuClaim(name string, count int64, admin bool) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("claim-" + name)}}
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if admin {
		req.AdminAccess = ptr.To(true)
	}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}
	return claim
}

func gpuClass() map[string]*resourceapi.DeviceClass {
	return map[string]*resourceapi.DeviceClass{"gpu": {ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}}
}

// scenario is a cluster built by allocating claims for pods one by one.
type scenario struct {
	t         testing.TB
	alloc     *allocator.Allocator
	inv       *allocator.Inventory
	nodes     []*corev1.Node
	slices    []*resourceapi.ResourceSlice
	inUse     *allocator.InUse
	claims    []*resourceapi.ResourceClaim
	pods      []Pod
	shareSeed int
}

func newScenario(t testing.TB, slices ...*resourceapi.ResourceSlice) *scenario {
	s := &scenario{t: t, slices: slices, inUse: allocator.NewInUse()}
	s.alloc = allocator.New(allocator.Options{NewShareID: func() types.UID {
		s.shareSeed++
		return types.UID(fmt.Sprintf("share-%d", s.shareSeed))
	}})
	s.inv = s.alloc.Prepare(allocator.Snapshot{Classes: gpuClass(), Slices: slices})
	seen := map[string]bool{}
	for _, slice := range slices {
		if slice.Spec.NodeName != nil && !seen[*slice.Spec.NodeName] {
			seen[*slice.Spec.NodeName] = true
			s.nodes = append(s.nodes, node(*slice.Spec.NodeName))
		}
	}
	return s
}

// run allocates the claims not yet allocated on the node and reserves all
// of them for a new pod; false when they do not fit.
func (s *scenario) run(name string, priority int32, nodeName string, claims ...*resourceapi.ResourceClaim) bool {
	var pending []*resourceapi.ResourceClaim
	for _, c := range claims {
		if s.inUse.Claim(c.UID) == nil {
			pending = append(pending, c)
		}
	}
	if len(pending) > 0 {
		r, err := s.alloc.Allocate(context.Background(), s.inv.State(s.inUse), pending, node(nodeName))
		if err != nil {
			s.t.Fatal(err)
		}
		if !r.Fits() {
			return false
		}
		for i, c := range pending {
			c.Status.Allocation = r.Allocations[i]
			s.inUse.SetClaim(c.UID, r.Allocations[i])
			s.claims = append(s.claims, c)
		}
	}
	uid := types.UID("pod-" + name)
	for _, c := range claims {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: name, UID: uid})
	}
	s.pods = append(s.pods, Pod{UID: uid, Key: "default/" + name, Priority: priority, Node: nodeName})
	return true
}

func (s *scenario) cluster() *Cluster {
	return &Cluster{Allocator: s.alloc, Inventory: s.inv, InUse: s.inUse, Claims: s.claims, Pods: s.pods, Slices: s.slices}
}

// inUseWithout is the accounting with the claims released whose every
// consumer is gone, built from scratch.
func (s *scenario) inUseWithout(gone map[types.UID]bool) *allocator.InUse {
	u := allocator.NewInUse()
	for _, c := range s.claims {
		free := true
		for _, r := range c.Status.ReservedFor {
			free = free && gone[r.UID]
		}
		if !free {
			u.SetClaim(c.UID, c.Status.Allocation)
		}
	}
	return u
}

func keys(pods []Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s(%d)", p.Key, p.Priority))
	}
	return out
}

func TestFind(t *testing.T) {
	type pod struct {
		name     string
		priority int32
		node     string
		claims   []string
	}
	for _, tc := range []struct {
		name      string
		slices    []*resourceapi.ResourceSlice
		claims    map[string]*resourceapi.ResourceClaim
		pods      []pod
		priority  int32
		policy    corev1.PreemptionPolicy
		request   int64
		members   int
		want      []string
		wantNodes []string
		reason    string
	}{
		{
			name:   "one lowest-priority pod, not more",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 4)},
			claims: map[string]*resourceapi.ResourceClaim{"c1": gpuClaim("c1", 1, false), "c2": gpuClaim("c2", 1, false), "c3": gpuClaim("c3", 2, false)},
			pods: []pod{
				{"low", 1, "a", []string{"c1"}}, {"mid", 2, "a", []string{"c2"}}, {"big", 3, "a", []string{"c3"}},
			},
			priority: 10, request: 1,
			want: []string{"default/low(1)"}, wantNodes: []string{"a"},
		},
		{
			name:   "two devices: one pod of two beats two pods of one",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 4)},
			claims: map[string]*resourceapi.ResourceClaim{"c1": gpuClaim("c1", 1, false), "c2": gpuClaim("c2", 1, false), "c3": gpuClaim("c3", 2, false)},
			pods: []pod{
				{"low", 1, "a", []string{"c1"}}, {"low2", 1, "a", []string{"c2"}}, {"big", 5, "a", []string{"c3"}},
			},
			priority: 10, request: 2,
			want: []string{"default/big(5)"}, wantNodes: []string{"a"},
		},
		{
			name:     "preemptionPolicy Never",
			slices:   []*resourceapi.ResourceSlice{nodeSlice("a", 1)},
			claims:   map[string]*resourceapi.ResourceClaim{"c1": gpuClaim("c1", 1, false)},
			pods:     []pod{{"low", 1, "a", []string{"c1"}}},
			priority: 10, policy: corev1.PreemptNever, request: 1,
			reason: "preemptionPolicy is Never",
		},
		{
			name:     "equal priority is never preempted",
			slices:   []*resourceapi.ResourceSlice{nodeSlice("a", 1)},
			claims:   map[string]*resourceapi.ResourceClaim{"c1": gpuClaim("c1", 1, false)},
			pods:     []pod{{"same", 10, "a", []string{"c1"}}},
			priority: 10, request: 1,
			reason: "a: no lower-priority pod holds devices usable here: " + "",
		},
		{
			name:   "shared claim: both consumers go or none",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 2)},
			claims: map[string]*resourceapi.ResourceClaim{"shared": gpuClaim("shared", 1, false), "c2": gpuClaim("c2", 1, false)},
			pods: []pod{
				{"s1", 1, "a", []string{"shared"}}, {"s2", 1, "a", []string{"shared"}}, {"other", 3, "a", []string{"c2"}},
			},
			priority: 10, request: 2,
			want: []string{"default/s1(1)", "default/s2(1)", "default/other(3)"}, wantNodes: []string{"a"},
		},
		{
			name:   "shared claim with a higher-priority consumer frees nothing",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 1)},
			claims: map[string]*resourceapi.ResourceClaim{"shared": gpuClaim("shared", 1, false)},
			pods: []pod{
				{"s1", 1, "a", []string{"shared"}}, {"s2", 20, "a", []string{"shared"}},
			},
			priority: 10, request: 1,
		},
		{
			name:   "admin access frees nothing",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 1)},
			claims: map[string]*resourceapi.ResourceClaim{"c1": gpuClaim("c1", 1, false), "admin": gpuClaim("admin", 1, true)},
			pods: []pod{
				{"monitor", 1, "a", []string{"admin"}}, {"user", 5, "a", []string{"c1"}},
			},
			priority: 10, request: 1,
			want: []string{"default/user(5)"}, wantNodes: []string{"a"},
		},
		{
			name:   "does not fit even with every lower-priority pod gone",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 2)},
			claims: map[string]*resourceapi.ResourceClaim{"c1": gpuClaim("c1", 1, false), "c2": gpuClaim("c2", 1, false)},
			pods: []pod{
				{"low", 1, "a", []string{"c1"}}, {"high", 20, "a", []string{"c2"}},
			},
			priority: 10, request: 2,
		},
		{
			name:   "a network device held by a pod on another node",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 1), nodeSlice("b", 0), nodeSlice("", 1)},
			claims: map[string]*resourceapi.ResourceClaim{"local": gpuClaim("local", 1, false), "net": gpuClaim("net", 1, false)},
			pods: []pod{
				{"a-user", 1, "a", []string{"local"}}, {"b-user", 2, "b", []string{"net"}},
			},
			priority: 10, request: 2,
			want: []string{"default/a-user(1)", "default/b-user(2)"}, wantNodes: []string{"a"},
		},
		{
			name:   "gang across nodes",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 2), nodeSlice("b", 2)},
			claims: map[string]*resourceapi.ResourceClaim{
				"a1": gpuClaim("a1", 1, false), "a2": gpuClaim("a2", 1, false), "b1": gpuClaim("b1", 1, false), "b2": gpuClaim("b2", 1, false),
			},
			pods: []pod{
				{"a-low", 1, "a", []string{"a1"}}, {"a-high", 3, "a", []string{"a2"}}, {"b-low", 2, "b", []string{"b1"}}, {"b-high", 4, "b", []string{"b2"}},
			},
			priority: 10, request: 2, members: 2,
			want: []string{"default/a-low(1)", "default/b-low(2)", "default/a-high(3)", "default/b-high(4)"}, wantNodes: []string{"a", "b"},
		},
		{
			name:   "gang of two single-device members",
			slices: []*resourceapi.ResourceSlice{nodeSlice("a", 2), nodeSlice("b", 2)},
			claims: map[string]*resourceapi.ResourceClaim{
				"a1": gpuClaim("a1", 1, false), "a2": gpuClaim("a2", 1, false), "b1": gpuClaim("b1", 1, false), "b2": gpuClaim("b2", 1, false),
			},
			pods: []pod{
				{"a-low", 1, "a", []string{"a1"}}, {"a-high", 3, "a", []string{"a2"}}, {"b-low", 2, "b", []string{"b1"}}, {"b-high", 4, "b", []string{"b2"}},
			},
			priority: 10, request: 1, members: 2,
			want: []string{"default/a-low(1)", "default/b-low(2)"}, wantNodes: []string{"a", "b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, tc.slices...)
			for _, p := range tc.pods {
				var claims []*resourceapi.ResourceClaim
				for _, c := range p.claims {
					claims = append(claims, tc.claims[c])
				}
				if !s.run(p.name, p.priority, p.node, claims...) {
					t.Fatalf("pod %s does not fit", p.name)
				}
			}
			preemptor := &Preemptor{Priority: tc.priority}
			if tc.policy != "" {
				preemptor.PreemptionPolicy = &tc.policy
			}
			members := max(tc.members, 1)
			for i := range members {
				preemptor.Members = append(preemptor.Members, Member{
					Key:    fmt.Sprintf("default/new-%d", i),
					Claims: []*resourceapi.ResourceClaim{gpuClaim(fmt.Sprintf("new-%d", i), tc.request, false)},
					Nodes:  s.nodes,
				})
			}
			d, err := Find(context.Background(), s.cluster(), preemptor, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("victims %v, reason %q, attempts %d", keys(d.Victims), d.Reason, d.Attempts)
			if got := keys(d.Victims); !slices.Equal(got, tc.want) {
				t.Errorf("victims %v, want %v", got, tc.want)
			}
			if d.Possible != (tc.want != nil) {
				t.Errorf("possible %v, want %v (reason %q)", d.Possible, tc.want != nil, d.Reason)
			}
			if !d.Possible && d.Reason == "" {
				t.Error("no reason given")
			}
			if tc.reason != "" && d.Reason != tc.reason && !(len(d.Reason) > len(tc.reason) && d.Reason[:len(tc.reason)] == tc.reason) {
				t.Errorf("reason %q, want %q", d.Reason, tc.reason)
			}
			var nodes []string
			for _, r := range d.Placement {
				nodes = append(nodes, r.Node)
			}
			slices.Sort(nodes)
			if d.Possible && !slices.Equal(nodes, tc.wantNodes) {
				t.Errorf("placed on %v, want %v", nodes, tc.wantNodes)
			}
			if d.Possible && !d.Exact {
				t.Error("not exact")
			}
			for _, v := range d.Victims {
				if len(d.FreedBy[v.UID]) == 0 {
					t.Errorf("victim %s frees nothing", v.Key)
				}
			}
		})
	}
}

// TestFindOutOfAttempts: with too few allocator calls to prove the best
// choice, Find still returns victims that make room, none of which could
// be spared, and says the choice is not proven.
func TestFindOutOfAttempts(t *testing.T) {
	s := newScenario(t, nodeSlice("a", 6))
	for i := range 6 {
		c := gpuClaim(fmt.Sprintf("c%d", i), 1, false)
		if !s.run(fmt.Sprintf("p%d", i), int32(i), "a", c) {
			t.Fatal("does not fit")
		}
	}
	preemptor := &Preemptor{Priority: 10, Members: []Member{{Key: "default/new", Claims: []*resourceapi.ResourceClaim{gpuClaim("new", 3, false)}, Nodes: s.nodes}}}
	exact, err := Find(context.Background(), s.cluster(), preemptor, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(exact.Victims), []string{"default/p0(0)", "default/p1(1)", "default/p2(2)"}; !exact.Exact || !slices.Equal(got, want) {
		t.Fatalf("victims %v (exact %v), want %v", got, exact.Exact, want)
	}
	// Enough calls for the first solution (8: none, all, one per pod
	// spared), not for the proof.
	d, err := Find(context.Background(), s.cluster(), preemptor, Options{MaxAttempts: 9})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Possible || d.Exact || len(d.Victims) != 3 || d.Attempts != 9 {
		t.Errorf("possible %v, exact %v, victims %v, attempts %d", d.Possible, d.Exact, keys(d.Victims), d.Attempts)
	}
	d, err = Find(context.Background(), s.cluster(), preemptor, Options{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d.Possible || d.Exact || !strings.Contains(d.Reason, "out of attempts") {
		t.Errorf("possible %v, exact %v, reason %q", d.Possible, d.Exact, d.Reason)
	}
}

// TestFindWaitsForTerminating: a pod already terminating (the victim of an
// earlier preemption) frees its devices without being chosen again, so a
// second preemptor needs no new victims; and Preemptor.Place replaces the
// built-in placement.
func TestFindWaitsForTerminating(t *testing.T) {
	s := newScenario(t, nodeSlice("a", 2))
	for i, name := range []string{"going", "staying"} {
		if !s.run(name, int32(i+1), "a", gpuClaim(name, 1, false)) {
			t.Fatal("does not fit")
		}
	}
	s.pods[0].Terminating = true
	preemptor := &Preemptor{Priority: 10, Members: []Member{{Key: "default/new", Claims: []*resourceapi.ResourceClaim{gpuClaim("new", 1, false)}, Nodes: s.nodes}}}
	d, err := Find(context.Background(), s.cluster(), preemptor, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Possible || len(d.Victims) != 0 || d.Placement[0].Node != "a" {
		t.Errorf("possible %v, victims %v, placement %+v", d.Possible, keys(d.Victims), d.Placement)
	}
	// Two devices: the staying pod must go too, the terminating one is
	// not counted.
	preemptor.Members[0].Claims = []*resourceapi.ResourceClaim{gpuClaim("new", 2, false)}
	if d, err = Find(context.Background(), s.cluster(), preemptor, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(d.Victims); !slices.Equal(got, []string{"default/staying(2)"}) {
		t.Errorf("victims %v", got)
	}

	calls := 0
	preemptor.Place = func(ctx context.Context, st *allocator.State, _ *allocator.InUse) ([]allocator.Result, string, error) {
		calls++
		r, err := s.alloc.Allocate(ctx, st, preemptor.Members[0].Claims, node("a"))
		if err != nil || !r.Fits() {
			return nil, "does not fit", err
		}
		return []allocator.Result{r}, "", nil
	}
	if d, err = Find(context.Background(), s.cluster(), preemptor, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(d.Victims); !slices.Equal(got, []string{"default/staying(2)"}) || calls == 0 || d.Attempts != calls {
		t.Errorf("with Place: victims %v, %d calls, %d attempts", got, calls, d.Attempts)
	}
}
