package allocation

import (
	"fmt"
	"slices"
	"testing"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
)

// newTestPlacementState is the state of a cluster of the nodes, one GPU
// each, built from listers over plain indexers: no informers, no clients.
func newTestPlacementState(t *testing.T, nodeNames ...string) *placementState {
	t.Helper()
	index := func(objects ...any) cache.Indexer {
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, obj := range objects {
			mustAdd(t, indexer, obj)
		}
		return indexer
	}
	var nodes, resourceSlices []any
	for _, name := range nodeNames {
		nodes, resourceSlices = append(nodes, makeNode(name)), append(resourceSlices, makeSlice(name, 1, "a100"))
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return newPlacementState(placementInputs{
		allocator:   allocator.New(allocator.Options{}),
		podLister:   corelisters.NewPodLister(index()),
		nodeLister:  corelisters.NewNodeLister(index(nodes...)),
		claimLister: resourcelisters.NewResourceClaimLister(index()),
		classLister: resourcelisters.NewDeviceClassLister(index(makeClass())),
		sliceLister: resourcelisters.NewResourceSliceLister(index(resourceSlices...)),
		waits:       newBindingWaits(),
		bound:       newBoundPods(10),
		now:         func() time.Time { return now },
	})
}

// TestPlacementState: what the state is told (allocations observed,
// nominations made and dropped) decides where a pod of priority 10 with
// one GPU claim goes, and what the decision records as pending.
func TestPlacementState(t *testing.T) {
	gpu0 := func() *resourceapi.AllocationResult {
		return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: testDriver, Pool: "node-a", Device: "gpu-0",
		}}}}
	}
	const otherClaim, nominated = types.UID("uid-other-claim"), types.UID("uid-nominated")
	type step struct {
		// do: "allocated", "deallocated" or "deleted" (otherClaim as the
		// informer shows it), "nominate" (nominated, with priority, for
		// gpu-0) or "drop" (its nomination).
		do       string
		priority int32
	}
	tests := map[string]struct {
		steps []step
		// wantNode is where the pod goes, "" when it does not fit.
		wantNode        string
		wantPending     int
		wantNominations int
	}{
		"free GPU: placed": {
			wantNode: "node-a", wantPending: 1,
		},
		"GPU allocated to another claim: unschedulable": {
			steps: []step{{do: "allocated"}},
		},
		"GPU deallocated again: placed": {
			steps:    []step{{do: "allocated"}, {do: "deallocated"}},
			wantNode: "node-a", wantPending: 1,
		},
		"claim holding the GPU deleted: placed": {
			steps:    []step{{do: "allocated"}, {do: "deleted"}},
			wantNode: "node-a", wantPending: 1,
		},
		"GPU held for a nominated pod of higher priority: unschedulable": {
			steps:           []step{{do: "nominate", priority: 100}},
			wantNominations: 1,
		},
		"GPU held for a nominated pod of lower priority: placed, the nomination stays": {
			steps:    []step{{do: "nominate", priority: 1}},
			wantNode: "node-a", wantPending: 1, wantNominations: 1,
		},
		"nomination dropped: placed": {
			steps:    []step{{do: "nominate", priority: 100}, {do: "drop"}},
			wantNode: "node-a", wantPending: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s := newTestPlacementState(t, "node-a")
			for _, step := range tc.steps {
				switch step.do {
				case "allocated":
					s.observe(otherClaim, "5", gpu0(), false)
				case "deallocated":
					s.observe(otherClaim, "6", nil, false)
				case "deleted":
					s.observe(otherClaim, "6", nil, true)
				case "nominate":
					s.nominate(&nomination{podUID: nominated, key: testNamespace + "/nominated", node: "node-a", priority: step.priority, holds: []*resourceapi.AllocationResult{gpu0()}})
				case "drop":
					if n := s.dropNomination(nominated); n == nil {
						t.Fatal("no nomination to drop")
					}
				default:
					t.Fatalf("unknown step %q", step.do)
				}
			}

			pod := makePod("pod", withGeneratedClaim("gpu"), withPriority(10))
			d, err := s.decide(ctx, pod, []*resourcev1.ResourceClaim{generatedClaim(pod, "gpu")})
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if d.node != tc.wantNode || d.unschedulable != (tc.wantNode == "") {
				t.Errorf("decision: node %q, unschedulable %v (%s), want node %q", d.node, d.unschedulable, d.summary, tc.wantNode)
			}
			if tc.wantNode != "" {
				if len(d.claims) != 1 || d.claims[0].newAllocation == nil || describeResults(d.claims[0].newAllocation) != "node-a/gpu-0" {
					t.Errorf("decision claims: %+v, want gpu-0 allocated", d.claims)
				}
				if got := d.claims[0].consumer.UID; got != pod.UID {
					t.Errorf("consumer %q, want the pod", got)
				}
			}
			if got := s.pendingCount(); got != tc.wantPending {
				t.Errorf("pending allocations: %d, want %d", got, tc.wantPending)
			}
			if got := s.nominationCount(); got != tc.wantNominations {
				t.Errorf("nominations: %d, want %d", got, tc.wantNominations)
			}
		})
	}
}

// TestPlacementStateGang: a gang of two pods with one GPU claim each is
// placed all or nothing across two nodes of one GPU each.
func TestPlacementStateGang(t *testing.T) {
	gpu0 := &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: testDriver, Pool: "node-b", Device: "gpu-0",
	}}}}
	tests := map[string]struct {
		// allocated are the devices other claims hold, as the informer
		// shows them.
		allocated []*resourceapi.AllocationResult
		minCount  int32
		wantNodes []string
	}{
		"both GPUs free: both placed": {
			minCount: 2, wantNodes: []string{"node-a", "node-b"},
		},
		"one GPU taken: none placed": {
			allocated: []*resourceapi.AllocationResult{gpu0}, minCount: 2, wantNodes: []string{"", ""},
		},
		"one GPU taken, minCount 1: one placed": {
			allocated: []*resourceapi.AllocationResult{gpu0}, minCount: 1, wantNodes: []string{"node-a", ""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s := newTestPlacementState(t, "node-a", "node-b")
			for i, allocation := range tc.allocated {
				s.observe(types.UID(fmt.Sprintf("uid-other-%d", i)), "5", allocation, false)
			}
			group := &schedulingv1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "group", Namespace: testNamespace, UID: "uid-group"},
				Spec: schedulingv1beta1.PodGroupSpec{
					SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: tc.minCount}},
				},
			}
			var members []*gangMember
			for _, name := range []string{"pod-0", "pod-1"} {
				pod := makePod(name, withGeneratedClaim("gpu"))
				members = append(members, &gangMember{pod: pod, claims: []*resourcev1.ResourceClaim{generatedClaim(pod, "gpu")}, d: &decision{}})
			}
			result, err := s.decideGang(ctx, group, nil, members, int(tc.minCount), false)
			if err != nil {
				t.Fatalf("decideGang: %v", err)
			}
			var gotNodes []string
			pending := 0
			for _, m := range members {
				gotNodes = append(gotNodes, m.d.node)
				if m.d.node != "" {
					pending++
				}
			}
			slices.Sort(gotNodes)
			want := slices.Sorted(slices.Values(tc.wantNodes))
			if !slices.Equal(gotNodes, want) {
				t.Errorf("nodes %q, want %q (%s)", gotNodes, want, result.Reason)
			}
			if got := s.pendingCount(); got != pending {
				t.Errorf("pending allocations: %d, want one per placed member (%d)", got, pending)
			}
		})
	}
}

// describeResults is "<pool>/<device>" of a one-device allocation.
func describeResults(allocation *resourceapi.AllocationResult) string {
	if len(allocation.Devices.Results) != 1 {
		return ""
	}
	r := allocation.Devices.Results[0]
	return r.Pool + "/" + r.Device
}

// TestUnschedulablePods: a parked key waits for the next cluster event
// unless one arrived while its attempt ran; moveAll takes every key but
// the one excepted.
func TestUnschedulablePods(t *testing.T) {
	tests := map[string]struct {
		park           []string
		eventMeanwhile bool
		except         string
		wantParked     []string
		wantMoved      int
	}{
		"parked until an event": {
			park: []string{"a", "b"}, wantParked: []string{"a", "b"}, wantMoved: 2,
		},
		"event during the attempt: not parked": {
			park: []string{"a"}, eventMeanwhile: true, wantMoved: 0,
		},
		"the excepted key stays": {
			park: []string{"a", "b"}, except: "a", wantParked: []string{"a", "b"}, wantMoved: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u := newUnschedulablePods(clock.RealClock{})
			before := u.clusterEvents.Load()
			if tc.eventMeanwhile {
				u.moveAll("")
			}
			for _, key := range tc.park {
				if parked := u.park(key, before); parked == tc.eventMeanwhile {
					t.Errorf("park %s: %v", key, parked)
				}
			}
			for _, key := range tc.wantParked {
				if !u.has(key) {
					t.Errorf("%s not parked", key)
				}
			}
			if moved := u.moveAll(tc.except); len(moved) != tc.wantMoved {
				t.Errorf("moved %v, want %d keys", moved, tc.wantMoved)
			}
			if tc.except != "" && !u.has(tc.except) {
				t.Errorf("excepted key %s moved", tc.except)
			}
		})
	}
}

// TestUnschedulableLeftover: a pod parked for longer than maxParked is
// taken out without a cluster event; a younger one stays.
func TestUnschedulableLeftover(t *testing.T) {
	now := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	u := newUnschedulablePods(now)
	events := u.clusterEvents.Load()
	u.park("old", events)
	now.SetTime(now.Now().Add(maxParked - time.Minute))
	u.park("young", events)

	tests := []struct {
		after time.Duration
		want  []string
	}{
		{after: 30 * time.Second, want: nil},
		{after: time.Minute + time.Second, want: []string{"old"}},
		{after: 0, want: nil},
		{after: maxParked, want: []string{"young"}},
	}
	for i, tc := range tests {
		now.SetTime(now.Now().Add(tc.after))
		if got := u.takeOlderThan(maxParked); !slices.Equal(got, tc.want) {
			t.Errorf("step %d: took %v, want %v", i, got, tc.want)
		}
	}
	if u.clusterEvents.Load() != events {
		t.Errorf("the flush counted as a cluster event")
	}
}
