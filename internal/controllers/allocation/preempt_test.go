package allocation

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

func withPriority(priority int32) podOption {
	return func(pod *corev1.Pod) { pod.Spec.Priority = &priority }
}

func evictions(actions []k8stesting.Action) []string {
	var names []string
	for _, action := range actions {
		if action.GetVerb() == "create" && action.GetResource().Resource == "pods" && action.GetSubresource() == "eviction" {
			names = append(names, action.(k8stesting.CreateAction).GetObject().(interface{ GetName() string }).GetName())
		}
	}
	return names
}

// TestPreemptionNomination: a high-priority pod evicts the low one holding
// the only GPU and is nominated; once the victim's claim is released, a
// pending pod of equal priority does not get the held GPU; when the
// preemptor is deleted, it does.
func TestPreemptionNomination(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	logger := klog.FromContext(ctx)
	victim := makePod("victim", withGeneratedClaim("gpu"), withNodeName("node-a"), withPriority(10))
	preemptor := makePod("preemptor", withGeneratedClaim("gpu"), withPriority(100))
	equal := makePod("equal", withGeneratedClaim("gpu"), withPriority(100))
	victimClaim := generatedClaim(victim, "gpu", allocatedOn("node-a", "gpu-0"), reservedFor(victim))
	tc := testCase{
		nodes:  []*corev1.Node{makeNode("node-a")},
		slices: []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100")},
		pods:   []*corev1.Pod{victim, preemptor, equal},
		claims: []*resourcev1.ResourceClaim{victimClaim, generatedClaim(preemptor, "gpu"), generatedClaim(equal, "gpu")},
	}
	c := newTestController(t, logger, tc)

	if err := c.syncPod(ctx, podKey(preemptor)); !errors.Is(err, errUnschedulable) {
		t.Fatalf("sync preemptor: %v", err)
	}
	if got := evictions(c.kubeClient.Actions()); !slices.Equal(got, []string{"victim"}) {
		t.Errorf("evictions: %v, want [victim]", got)
	}
	if n := c.state.nominations[preemptor.UID]; n == nil || n.node != "node-a" {
		t.Fatalf("nomination of the preemptor: %+v", n)
	}

	// The victim is gone, its claim released.
	mustDelete(t, c.podStore, victim)
	mustDelete(t, c.claimStore, victimClaim)
	c.onClaim(logger, victimClaim, true)

	// The equal pod does not take the held GPU, and evicts nothing.
	before := len(evictions(c.kubeClient.Actions()))
	if err := c.syncPod(ctx, podKey(equal)); !errors.Is(err, errUnschedulable) {
		t.Fatalf("sync equal pod while the GPU is held: %v", err)
	}
	if got := evictions(c.kubeClient.Actions()); len(got) != before {
		t.Errorf("evictions after the equal pod: %v", got)
	}

	// The preemptor is deleted: the nomination is abandoned.
	mustDelete(t, c.podStore, preemptor)
	if err := c.syncPod(ctx, podKey(preemptor)); err != nil {
		t.Fatalf("sync deleted preemptor: %v", err)
	}
	if len(c.state.nominations) != 0 {
		t.Errorf("nominations left: %v", c.state.nominations)
	}
	if err := c.syncPod(ctx, podKey(equal)); err != nil {
		t.Fatalf("sync equal pod after the preemptor is gone: %v", err)
	}
	pod, err := c.kubeClient.CoreV1().Pods(testNamespace).Get(ctx, "equal", metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != "node-a" {
		t.Errorf("equal pod: node %q, %v", pod.Spec.NodeName, err)
	}
}

func mustDelete(t *testing.T, store interface{ Delete(any) error }, obj any) {
	t.Helper()
	if err := store.Delete(obj); err != nil {
		t.Fatalf("delete from store: %v", err)
	}
}

// TestPreemptionNominationRestored: after a restart, a pod nominated
// before it (status.nominatedNodeName) gets its hold back before any pod
// is placed: the freed GPU goes to it, not to a pending pod of equal
// priority synced first.
func TestPreemptionNominationRestored(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	preemptor := makePod("preemptor", withGeneratedClaim("gpu"), withPriority(100))
	preemptor.Status.NominatedNodeName = "node-a"
	equal := makePod("equal", withGeneratedClaim("gpu"), withPriority(100))
	tc := testCase{
		nodes:  []*corev1.Node{makeNode("node-a")},
		slices: []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100")},
		pods:   []*corev1.Pod{preemptor, equal},
		claims: []*resourcev1.ResourceClaim{generatedClaim(preemptor, "gpu"), generatedClaim(equal, "gpu")},
	}
	c := newTestController(t, klog.FromContext(ctx), tc)
	if err := c.restoreNominations(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.state.nominations[preemptor.UID]; n == nil || n.node != "node-a" {
		t.Errorf("nomination of the preemptor after the restart: %+v", n)
	}
	if err := c.syncPod(ctx, podKey(equal)); !errors.Is(err, errUnschedulable) {
		t.Fatalf("sync equal pod while the GPU is held: %v", err)
	}
	if err := c.syncPod(ctx, podKey(preemptor)); err != nil {
		t.Fatalf("sync preemptor: %v", err)
	}
	for name, want := range map[string]string{"preemptor": "node-a", "equal": ""} {
		pod, err := c.kubeClient.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName != want {
			t.Errorf("pod %s: node %q, want %q (%v)", name, pod.Spec.NodeName, want, err)
		}
	}
}

// TestPreemptionSearchNotRepeated: a victim search that found none is not
// run again for the pod until something it depends on changes (an
// informer event or a nomination bumps preemptionInputs).
func TestPreemptionSearchNotRepeated(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	running := makePod("running", withGeneratedClaim("gpu"), withNodeName("node-a"), withPriority(100))
	pending := makePod("pending", withGeneratedClaim("gpu"), withPriority(100))
	runningClaim := generatedClaim(running, "gpu", allocatedOn("node-a", "gpu-0"), reservedFor(running))
	tc := testCase{
		nodes:  []*corev1.Node{makeNode("node-a")},
		slices: []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100")},
		pods:   []*corev1.Pod{running, pending},
		claims: []*resourcev1.ResourceClaim{runningClaim, generatedClaim(pending, "gpu")},
	}
	c := newTestController(t, klog.FromContext(ctx), tc)
	claims := []*resourcev1.ResourceClaim{generatedClaim(pending, "gpu")}
	d, err := c.state.decide(ctx, pending, claims)
	if err != nil || d.preemption == nil || d.preemption.reason == "" {
		t.Fatalf("first decide: %v %+v", err, d.preemption)
	}
	// The running pod's priority drops without an event reaching the
	// handlers: the search is not run again, the answer stays.
	lower := running.DeepCopy()
	lower.Spec.Priority = new(int32(1))
	if err := c.podStore.Update(lower); err != nil {
		t.Fatal(err)
	}
	if d, err = c.state.decide(ctx, pending, claims); err != nil || d.preemption == nil || d.preemption.reason == "" {
		t.Errorf("second decide, nothing changed: %v %+v, want the remembered reason", err, d.preemption)
	}
	// An event: the search runs again and finds the victim.
	c.state.preemptionInputs.Add(1)
	if d, err = c.state.decide(ctx, pending, claims); err != nil || d.preemption == nil || len(d.preemption.victims) != 1 {
		t.Errorf("decide after an event: %v %+v, want one victim", err, d.preemption)
	}
}
