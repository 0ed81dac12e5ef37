package allocation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/util/workqueue"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

const (
	condAttached = "example.com/attached"
	condFailed   = "example.com/attach-failed"
)

// conditionalSlice is makeSlice with devices that list binding
// conditions.
func conditionalSlice(node string, devices int) *resourcev1.ResourceSlice {
	slice := makeSlice(node, devices, "a100")
	for i := range slice.Spec.Devices {
		slice.Spec.Devices[i].BindingConditions = []string{condAttached}
		slice.Spec.Devices[i].BindingFailureConditions = []string{condFailed}
	}
	return slice
}

// withConditionalAllocation allocates the claim on a device with binding
// conditions at the given time and reserves it for the pod.
func withConditionalAllocation(node, device string, at time.Time, pod *corev1.Pod) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		allocatedOn(node, device)(claim)
		reservedFor(pod)(claim)
		result := &claim.Status.Allocation.Devices.Results[0]
		result.BindingConditions = []string{condAttached}
		result.BindingFailureConditions = []string{condFailed}
		claim.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: at}
	}
}

// bcStep is one step of a binding conditions test: what the driver
// reports and how much time passes, one sync of the pod, what follows.
type bcStep struct {
	// report sets a condition True on every allocated device of the
	// pod's claim, as a driver does.
	report  string
	advance time.Duration
	// wantErr is a substring of the sync's error, "" for none.
	wantErr        string
	wantNode       string
	wantAllocation string
	wantReserved   bool
	// wantReason is the reason of PodScheduled=False, "" for none;
	// wantMessage parts of its message.
	wantReason  string
	wantMessage []string
	// wantEvents are "<type> <reason>" of the events of this step.
	wantEvents []string
}

func TestBindingConditions(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod1 := makePod("pod-1", withGeneratedClaim("gpu"))
	waiting := bcStep{wantAllocation: "node-a/gpu-0", wantReserved: true, wantReason: ReasonBindingConditionsPending,
		wantMessage: []string{condAttached + " of device gpu.example.com/node-a/gpu-0 (claim default/pod-1-gpu)", "on node node-a", "binding timeout 10m0s"},
		wantEvents:  []string{"Normal " + ReasonBindingConditionsPending}}
	tests := map[string]struct {
		gateOff bool
		nodes   []*corev1.Node
		slices  []*resourcev1.ResourceSlice
		claim   *resourcev1.ResourceClaim
		steps   []bcStep
	}{
		"met: bound only once the condition is True": {
			steps: []bcStep{
				waiting,
				// Nothing changed: still waiting, no new event.
				{wantAllocation: "node-a/gpu-0", wantReserved: true, wantReason: ReasonBindingConditionsPending},
				{report: condAttached, wantNode: "node-a", wantAllocation: "node-a/gpu-0", wantReserved: true, wantReason: ReasonBindingConditionsPending,
					wantEvents: []string{"Normal Scheduled"}},
			},
		},
		"failure condition: deallocated and placed on another node": {
			nodes:  []*corev1.Node{makeNode("node-a"), makeNode("node-b")},
			slices: []*resourcev1.ResourceSlice{conditionalSlice("node-a", 1), conditionalSlice("node-b", 1)},
			steps: []bcStep{
				waiting,
				{report: condFailed, wantErr: "binding conditions failed", wantReason: ReasonBindingConditionsFailed,
					wantMessage: []string{"binding conditions failed on node node-a", "device gpu.example.com/node-a/gpu-0 of claim default/pod-1-gpu reports " + condFailed + "=True", "scheduled again"},
					wantEvents:  []string{"Warning " + ReasonBindingConditionsFailed}},
				{wantAllocation: "node-b/gpu-0", wantReserved: true, wantReason: ReasonBindingConditionsPending,
					wantEvents: []string{"Normal " + ReasonBindingConditionsPending}},
				{report: condAttached, wantNode: "node-b", wantAllocation: "node-b/gpu-0", wantReserved: true, wantReason: ReasonBindingConditionsPending,
					wantEvents: []string{"Normal Scheduled"}},
			},
		},
		"failure condition on the only device: tried there again": {
			steps: []bcStep{
				waiting,
				{report: condFailed, wantErr: "binding conditions failed", wantReason: ReasonBindingConditionsFailed, wantEvents: []string{"Warning " + ReasonBindingConditionsFailed}},
				waiting,
			},
		},
		"timeout: deallocated at the deadline": {
			steps: []bcStep{
				waiting,
				{advance: DefaultBindingTimeout - time.Second, wantAllocation: "node-a/gpu-0", wantReserved: true, wantReason: ReasonBindingConditionsPending},
				{advance: time.Second, wantErr: "binding conditions timed out", wantReason: ReasonBindingConditionsTimeout,
					wantMessage: []string{"binding conditions timed out on node node-a", condAttached + " of device gpu.example.com/node-a/gpu-0 (claim default/pod-1-gpu) not met within 10m0s"},
					wantEvents:  []string{"Warning " + ReasonBindingConditionsTimeout}},
			},
		},
		"allocated before, conditions met: bound": {
			claim: generatedClaim(pod1, "gpu", withConditionalAllocation("node-a", "gpu-0", start, pod1), withDeviceCondition(condAttached)),
			steps: []bcStep{{wantNode: "node-a", wantAllocation: "node-a/gpu-0", wantReserved: true, wantEvents: []string{"Normal Scheduled"}}},
		},
		"allocated long ago, never met: timed out at once": {
			claim: generatedClaim(pod1, "gpu", withConditionalAllocation("node-a", "gpu-0", start.Add(-DefaultBindingTimeout), pod1)),
			steps: []bcStep{{wantErr: "binding conditions timed out", wantReason: ReasonBindingConditionsTimeout, wantEvents: []string{"Warning " + ReasonBindingConditionsTimeout}}},
		},
		"gate off: devices with binding conditions are not allocated": {
			gateOff: true,
			slices:  []*resourcev1.ResourceSlice{conditionalSlice("node-a", 1)},
			steps:   []bcStep{{wantErr: errUnschedulable.Error(), wantReason: corev1.PodReasonUnschedulable, wantEvents: []string{"Warning FailedScheduling"}}},
		},
		"gate off: an allocation with pending conditions is bound at once": {
			gateOff: true,
			claim:   generatedClaim(pod1, "gpu", withConditionalAllocation("node-a", "gpu-0", start, pod1)),
			steps:   []bcStep{{wantNode: "node-a", wantAllocation: "node-a/gpu-0", wantReserved: true, wantEvents: []string{"Normal Scheduled"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceBindingConditions, !tc.gateOff)
			if tc.nodes == nil {
				tc.nodes = []*corev1.Node{makeNode("node-a")}
			}
			if tc.slices == nil {
				tc.slices = []*resourcev1.ResourceSlice{conditionalSlice("node-a", 1)}
			}
			if tc.claim == nil {
				tc.claim = generatedClaim(pod1, "gpu")
			}
			_, ctx := ktesting.NewTestContext(t)
			c := newTestController(t, klog.FromContext(ctx), testCase{nodes: tc.nodes, slices: tc.slices, pods: []*corev1.Pod{pod1}, claims: []*resourcev1.ResourceClaim{tc.claim}})
			fakeClock := testingclock.NewFakeClock(start)
			c.clock = fakeClock
			for i, step := range tc.steps {
				runBindingStep(ctx, t, c, fakeClock, i, step)
			}
		})
	}
}

func withDeviceCondition(condition string) claimOption {
	return func(claim *resourcev1.ResourceClaim) { reportCondition(claim, condition) }
}

// reportCondition sets the condition True on every allocated device.
func reportCondition(claim *resourcev1.ResourceClaim, condition string) {
	for _, result := range claim.Status.Allocation.Devices.Results {
		i := 0
		for i < len(claim.Status.Devices) && (claim.Status.Devices[i].Pool != result.Pool || claim.Status.Devices[i].Device != result.Device) {
			i++
		}
		if i == len(claim.Status.Devices) {
			claim.Status.Devices = append(claim.Status.Devices, resourcev1.AllocatedDeviceStatus{Driver: result.Driver, Pool: result.Pool, Device: result.Device})
		}
		apimeta.SetStatusCondition(&claim.Status.Devices[i].Conditions, metav1.Condition{Type: condition, Status: metav1.ConditionTrue, Reason: "Test", Message: "set by the test"})
	}
}

func runBindingStep(ctx context.Context, t *testing.T, c *testController, fakeClock *testingclock.FakeClock, i int, step bcStep) {
	t.Helper()
	claims := c.resourceClient.ResourceV1().ResourceClaims(testNamespace)
	if step.report != "" {
		claim, err := claims.Get(ctx, "pod-1-gpu", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reportCondition(claim, step.report)
		if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fakeClock.Step(step.advance)
	c.catchUp(t)

	err := c.syncPod(ctx, "default/pod-1")
	switch {
	case step.wantErr == "" && err != nil:
		t.Fatalf("step %d: unexpected error: %v", i, err)
	case step.wantErr != "" && (err == nil || !strings.Contains(err.Error(), step.wantErr)):
		t.Fatalf("step %d: expected error containing %q, got %v", i, step.wantErr, err)
	}

	pod, err := c.kubeClient.CoreV1().Pods(testNamespace).Get(ctx, "pod-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != step.wantNode {
		t.Errorf("step %d: pod on node %q, want %q", i, pod.Spec.NodeName, step.wantNode)
	}
	scheduled := podCondition(pod, corev1.PodScheduled)
	switch {
	case step.wantReason == "" && scheduled != nil:
		t.Errorf("step %d: unexpected PodScheduled condition %+v", i, scheduled)
	case step.wantReason != "" && (scheduled == nil || scheduled.Status != corev1.ConditionFalse || scheduled.Reason != step.wantReason || !containsAll(scheduled.Message, step.wantMessage...)):
		t.Errorf("step %d: expected PodScheduled=False/%s with %q, got %+v", i, step.wantReason, step.wantMessage, scheduled)
	}
	claim, err := claims.Get(ctx, "pod-1-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeAllocation(claim); got != step.wantAllocation {
		t.Errorf("step %d: allocation %q, want %q", i, got, step.wantAllocation)
	}
	if reserved := len(claim.Status.ReservedFor) == 1 && claim.Status.ReservedFor[0].UID == pod.UID; reserved != step.wantReserved {
		t.Errorf("step %d: reservedFor %v, want reserved %v", i, claim.Status.ReservedFor, step.wantReserved)
	}
	if claim.Status.Allocation == nil && len(claim.Status.Devices) > 0 {
		t.Errorf("step %d: device status of a deallocated claim kept: %v", i, claim.Status.Devices)
	}
	var events []string
	for len(c.recorder.Events) > 0 {
		events = append(events, <-c.recorder.Events)
	}
	if len(events) != len(step.wantEvents) {
		t.Fatalf("step %d: events %q, want %q", i, events, step.wantEvents)
	}
	for j, event := range events {
		if !strings.HasPrefix(event, step.wantEvents[j]+" ") {
			t.Errorf("step %d: event %q, want %q...", i, event, step.wantEvents[j])
		}
	}
}

// catchUp gives the informer stores what the server has, through the
// event handlers, as the informers would.
func (c *testController) catchUp(t *testing.T) {
	t.Helper()
	pods, err := c.kubeClient.CoreV1().Pods(testNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if err := c.podStore.Update(&pods.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := c.resourceClient.ResourceV1().ResourceClaims(testNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if err := c.claimStore.Update(claim); err != nil {
			t.Fatal(err)
		}
		c.onClaim(klog.Background(), claim, false)
	}
}

// TestBindingDeadlineRequeues: a waiting pod is not polled; it comes back
// through the queue once its deadline has passed, and not before.
func TestBindingDeadlineRequeues(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod1 := makePod("pod-1", withGeneratedClaim("gpu"))
	_, ctx := ktesting.NewTestContext(t)
	c := newTestController(t, klog.FromContext(ctx), testCase{nodes: []*corev1.Node{makeNode("node-a")}, slices: []*resourcev1.ResourceSlice{conditionalSlice("node-a", 1)},
		pods: []*corev1.Pod{pod1}, claims: []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")}})
	fakeClock := testingclock.NewFakeClock(start)
	c.clock = fakeClock
	c.bindingTimeout = time.Minute
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "test", Clock: fakeClock})
	t.Cleanup(c.queue.ShutDown)

	if err := c.syncPod(ctx, "default/pod-1"); err != nil {
		t.Fatal(err)
	}
	if !fakeClock.HasWaiters() {
		t.Fatal("no timer for the deadline")
	}
	fakeClock.Step(59 * time.Second)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("pod queued %d times before its deadline", n)
	}
	fakeClock.Step(2 * time.Second)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 1, nil
	})
	if err != nil {
		t.Fatalf("pod not queued at its deadline: %v", err)
	}
	key, _ := c.queue.Get()
	c.queue.Done(key)
	if err := c.syncPod(ctx, key); !errors.Is(err, errRetryLater) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("sync at the deadline: %v", err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

// TestBindingFailureOfASharedClaim: a claim that another pod uses too is
// not deallocated when its binding conditions fail; the pod that gives up
// only leaves reservedFor.
func TestBindingFailureOfASharedClaim(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod1 := makePod("pod-1", withSharedClaim("gpu", "shared"))
	pod2 := makePod("pod-2", withSharedClaim("gpu", "shared"))
	claim := makeClaim("shared", withConditionalAllocation("node-a", "gpu-0", start, pod1), reservedFor(pod2), withDeviceCondition(condFailed))
	_, ctx := ktesting.NewTestContext(t)
	c := newTestController(t, klog.FromContext(ctx), testCase{nodes: []*corev1.Node{makeNode("node-a")}, slices: []*resourcev1.ResourceSlice{conditionalSlice("node-a", 1)},
		pods: []*corev1.Pod{pod1, pod2}, claims: []*resourcev1.ResourceClaim{claim}})
	c.clock = testingclock.NewFakeClock(start)

	if err := c.syncPod(ctx, "default/pod-1"); err == nil || !strings.Contains(err.Error(), "binding conditions failed") {
		t.Fatalf("sync: %v", err)
	}
	got, err := c.resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Allocation == nil || len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0].Name != "pod-2" {
		t.Errorf("claim allocation %v, reservedFor %v; want still allocated, reserved for pod-2 only", got.Status.Allocation != nil, got.Status.ReservedFor)
	}
}
