package allocation

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

func TestAllocationTracker(t *testing.T) {
	alloc := func(device string) *resourceapi.AllocationResult {
		return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: testDriver, Pool: "node-a", Device: device,
		}}}}
	}
	const uid = types.UID("claim")
	type step struct {
		// One of: "pending", "written <rv>", "uncertain <rv>", "drop",
		// "observe <rv>" (allocated), "observe-free <rv>", "delete".
		do string
		rv string
		// busy is whether gpu-0 must count as allocated afterwards.
		busy bool
		// freed is what observe must report.
		freed bool
	}
	tests := map[string][]step{
		"pending until written and seen": {
			{do: "pending", busy: true},
			{do: "observe-free", rv: "10", busy: true}, // stale event while writing
			{do: "written", rv: "12", busy: true},
			{do: "observe-free", rv: "11", busy: true}, // older than the write
			{do: "observe", rv: "12", busy: true},
			{do: "observe-free", rv: "20", busy: false, freed: true},
		},
		"write failed for sure": {
			{do: "pending", busy: true},
			{do: "drop", busy: false},
		},
		"uncertain write that did not land": {
			{do: "pending", busy: true},
			{do: "uncertain", rv: "10", busy: true},
			{do: "observe-free", rv: "10", busy: true},
			{do: "observe-free", rv: "11", busy: false, freed: true},
		},
		"uncertain write that landed": {
			{do: "pending", busy: true},
			{do: "uncertain", rv: "10", busy: true},
			{do: "observe", rv: "11", busy: true},
		},
		"deleted claim frees its devices": {
			{do: "observe", rv: "5", busy: true},
			{do: "delete", rv: "6", busy: false, freed: true},
		},
		"pending claim deleted": {
			{do: "pending", busy: true},
			{do: "delete", rv: "6", busy: false, freed: true},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			state := newPlacementState(placementInputs{})
			tracker := state.tracker
			for i, s := range steps {
				freed := false
				switch s.do {
				case "pending":
					state.mutex.Lock()
					tracker.addPendingLocked(uid, "pod", "pod", alloc("gpu-0"))
					state.mutex.Unlock()
				case "written":
					tracker.written(uid, s.rv)
				case "uncertain":
					tracker.uncertain(uid, s.rv)
				case "drop":
					tracker.drop(uid)
				case "observe":
					freed = tracker.observe(uid, s.rv, alloc("gpu-0"), false)
				case "observe-free":
					freed = tracker.observe(uid, s.rv, nil, false)
				case "delete":
					freed = tracker.observe(uid, s.rv, nil, true)
				}
				state.mutex.Lock()
				busy := tracker.inUseLocked().Allocated(deviceID("gpu-0"))
				state.mutex.Unlock()
				if busy != s.busy {
					t.Errorf("step %d (%s %s): gpu-0 allocated=%v, expected %v", i, s.do, s.rv, busy, s.busy)
				}
				if freed != s.freed {
					t.Errorf("step %d (%s %s): freed=%v, expected %v", i, s.do, s.rv, freed, s.freed)
				}
			}
		})
	}
}

// countingLimiter retries at once and counts the calls per item, so the
// test sees whether a requeue went through the rate limiter.
type countingLimiter struct{ calls map[string]int }

func (l *countingLimiter) When(item string) time.Duration { l.calls[item]++; return 0 }
func (l *countingLimiter) Forget(item string)             { delete(l.calls, item) }
func (l *countingLimiter) NumRequeues(item string) int    { return l.calls[item] }

func TestEventHandlers(t *testing.T) {
	pod := makePod("pod-1", withGeneratedClaim("gpu"))
	tests := map[string]struct {
		// pods are in the informer.
		pods   []*corev1.Pod
		parked []string
		event  func(c *testController)
		// expectedQueue are the keys queued, sorted.
		expectedQueue []string
		// expectedRateLimited counts requeues through the limiter.
		expectedRateLimited int
	}{
		"pod with claims is queued": {
			event:         func(c *testController) { c.onPod(c.logger, pod, false) },
			expectedQueue: []string{"default/pod-1"},
		},
		"pod without claims is ignored": {
			event: func(c *testController) { c.onPod(c.logger, makePod("plain"), false) },
		},
		"finished pod is ignored and unparked": {
			parked: []string{"default/pod-1"},
			event: func(c *testController) {
				done := pod.DeepCopy()
				done.Status.Phase = corev1.PodSucceeded
				c.onPod(c.logger, done, false)
			},
		},
		"bound pod with allocated, reserved claims is ignored": {
			event: func(c *testController) {
				bound := makePod("pod-1", withGeneratedClaim("gpu"), withNodeName("node-a"))
				mustAdd(c.t, c.claimStore, generatedClaim(bound, "gpu", allocatedOn("node-a", "gpu-0"), reservedFor(bound)))
				c.onPod(c.logger, bound, false)
			},
		},
		"bound pod whose claim this controller allocated, informer behind: ignored": {
			event: func(c *testController) {
				bound := makePod("pod-1", withGeneratedClaim("gpu"), withNodeName("node-a"))
				claim := generatedClaim(bound, "gpu")
				mustAdd(c.t, c.claimStore, claim)
				c.state.mutex.Lock()
				c.state.tracker.addPendingLocked(claim.UID, bound.UID, bound.UID, &resourceapi.AllocationResult{})
				c.state.mutex.Unlock()
				c.state.written(claim.UID, "200")
				c.onPod(c.logger, bound, false)
			},
		},
		"bound pod with unallocated claim is queued": {
			event: func(c *testController) {
				bound := makePod("pod-1", withGeneratedClaim("gpu"), withNodeName("node-a"))
				mustAdd(c.t, c.claimStore, generatedClaim(bound, "gpu"))
				c.onPod(c.logger, bound, false)
			},
			expectedQueue: []string{"default/pod-1"},
		},
		"own status update of a parked pod is ignored": {
			parked: []string{"default/pod-1"},
			event: func(c *testController) {
				updated := pod.DeepCopy()
				updated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
				c.onPodUpdate(c.logger, pod, updated)
			},
		},
		"claim status update of a parked pod is queued": {
			parked: []string{"default/pod-1"},
			event: func(c *testController) {
				updated := makePod("pod-1", withGeneratedClaim("gpu"), withGeneratedClaim("nic"))
				c.onPodUpdate(c.logger, pod, updated)
			},
			expectedQueue: []string{"default/pod-1"},
		},
		"status update of a pod that is not parked is queued": {
			event: func(c *testController) {
				updated := pod.DeepCopy()
				updated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
				c.onPodUpdate(c.logger, pod, updated)
			},
			expectedQueue: []string{"default/pod-1"},
		},
		"node heartbeat does not retry parked pods": {
			parked: []string{"default/pod-1"},
			event: func(c *testController) {
				old := makeNode("node-a")
				updated := old.DeepCopy()
				updated.Status.Conditions[0].LastHeartbeatTime.Time = time.Now()
				c.onNode(c.logger, old, updated)
			},
		},
		"node that becomes ready retries parked pods through the rate limiter": {
			parked: []string{"default/pod-1", "default/pod-2"},
			event: func(c *testController) {
				c.onNode(c.logger, makeNode("node-a", notReady()), makeNode("node-a"))
			},
			expectedQueue:       []string{"default/pod-1", "default/pod-2"},
			expectedRateLimited: 2,
		},
		"new slice retries parked pods": {
			parked: []string{"default/pod-1"},
			event: func(c *testController) {
				c.snapshotHandler(c.logger, "ResourceSlice").OnAdd(makeSlice("node-z", 1, "a100"), false)
			},
			expectedQueue:       []string{"default/pod-1"},
			expectedRateLimited: 1,
		},
		"deallocated claim retries parked pods": {
			parked: []string{"default/pod-2"},
			event: func(c *testController) {
				claim := makeClaim("other", allocatedOn("node-a", "gpu-0"))
				c.onClaim(c.logger, claim, false)
				released := claim.DeepCopy()
				released.Status.Allocation = nil
				released.ResourceVersion = "6"
				c.onClaim(c.logger, released, false)
			},
			expectedQueue:       []string{"default/pod-2"},
			expectedRateLimited: 1,
		},
		"created claim brings back the pod that names it": {
			pods:   []*corev1.Pod{makePod("pod-3", withSharedClaim("gpu", "missing"))},
			parked: []string{"default/pod-3"},
			event: func(c *testController) {
				c.onClaim(c.logger, makeClaim("missing"), false)
			},
			expectedQueue: []string{"default/pod-3"},
		},
		"newly allocated claim does not retry parked pods": {
			parked: []string{"default/pod-2"},
			event: func(c *testController) {
				c.onClaim(c.logger, makeClaim("other", allocatedOn("node-a", "gpu-0")), false)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := newTestController(t, logger, testCase{pods: tc.pods})
			c.t, c.logger = t, logger
			limiter := &countingLimiter{calls: map[string]int{}}
			c.queue = workqueue.NewTypedRateLimitingQueue[string](limiter)
			defer c.queue.ShutDown()
			for _, key := range tc.parked {
				c.markUnschedulable(key, c.unschedulable.clusterEvents.Load())
			}
			tc.event(c)

			var queued []string
			for c.queue.Len() > 0 {
				key, _ := c.queue.Get()
				queued = append(queued, key)
				c.queue.Done(key)
			}
			// Parked pods come back in no particular order.
			slices.Sort(queued)
			if len(queued) != len(tc.expectedQueue) {
				t.Fatalf("expected queue %v, got %v", tc.expectedQueue, queued)
			}
			for i := range queued {
				if queued[i] != tc.expectedQueue[i] {
					t.Errorf("expected queue %v, got %v", tc.expectedQueue, queued)
				}
			}
			rateLimited := 0
			for _, n := range limiter.calls {
				rateLimited += n
			}
			if rateLimited != tc.expectedRateLimited {
				t.Errorf("expected %d rate-limited requeues, got %d", tc.expectedRateLimited, rateLimited)
			}
		})
	}
}

func TestNodeSelectorMatches(t *testing.T) {
	node := makeNode("node-a", withLabel("zone", "z1"), withLabel("gpus", "8"))
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := map[string]struct {
		terms []corev1.NodeSelectorTerm
		match bool
	}{
		"In":                  {[]corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "z0", "z1"))}, true},
		"In, other value":     {[]corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "z2"))}, false},
		"NotIn, missing key":  {[]corev1.NodeSelectorTerm{term(req("rack", corev1.NodeSelectorOpNotIn, "r1"))}, true},
		"Exists":              {[]corev1.NodeSelectorTerm{term(req("gpus", corev1.NodeSelectorOpExists))}, true},
		"DoesNotExist":        {[]corev1.NodeSelectorTerm{term(req("gpus", corev1.NodeSelectorOpDoesNotExist))}, false},
		"Gt":                  {[]corev1.NodeSelectorTerm{term(req("gpus", corev1.NodeSelectorOpGt, "4"))}, true},
		"Lt":                  {[]corev1.NodeSelectorTerm{term(req("gpus", corev1.NodeSelectorOpLt, "4"))}, false},
		"all of a term":       {[]corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "z1"), req("gpus", corev1.NodeSelectorOpLt, "4"))}, false},
		"any term":            {[]corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "z2")), term(req("zone", corev1.NodeSelectorOpIn, "z1"))}, true},
		"empty term":          {[]corev1.NodeSelectorTerm{{}}, false},
		"metadata.name field": {[]corev1.NodeSelectorTerm{nodeNameSelector("node-a").NodeSelectorTerms[0]}, true},
		"other name":          {[]corev1.NodeSelectorTerm{nodeNameSelector("node-b").NodeSelectorTerms[0]}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nodeaffinity.NodeSelectorMatches(&corev1.NodeSelector{NodeSelectorTerms: tc.terms}, node); got != tc.match {
				t.Errorf("expected match=%v, got %v", tc.match, got)
			}
		})
	}
}

func deviceID(device string) allocator.DeviceID {
	return allocator.DeviceID{Driver: testDriver, Pool: "node-a", Device: device}
}
