package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver/drivertesting"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

const (
	node    = "node-a"
	gpus    = "gpu.example.com"
	nics    = "nic.example.com"
	missing = "missing.example.com"
)

// harness is an agent with a fake API and unstarted informers whose
// stores the test fills.
type harness struct {
	agent    *Agent
	kube     *fake.Clientset
	pods     cache.Indexer
	claims   cache.Indexer
	recorder *record.FakeRecorder
	ctx      context.Context
}

func newHarness(t *testing.T, opts Options, pods ...*corev1.Pod) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	objects := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objects = append(objects, p)
	}
	kube := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	resourceFactory := resourceinformers.NewSharedInformerFactory(resourcefake.NewSimpleClientset(), 0)
	claimInformer := resourceFactory.Resource().V1().ResourceClaims()
	opts.Nodes = []string{node}
	a, err := New(klog.FromContext(ctx), kube, factory.Core().V1().Pods(), ClaimsFromLister{claimInformer.Lister()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(100)
	a.SetRecorder(recorder)
	h := &harness{agent: a, kube: kube, pods: factory.Core().V1().Pods().Informer().GetIndexer(),
		claims: claimInformer.Informer().GetIndexer(), recorder: recorder, ctx: ctx}
	for _, p := range pods {
		h.addPod(t, p)
	}
	return h
}

func (h *harness) addPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := h.pods.Add(pod); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) addClaims(t *testing.T, claims ...*resourcev1.ResourceClaim) {
	t.Helper()
	for _, c := range claims {
		if err := h.claims.Add(c); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *harness) sync(t *testing.T, key string) error {
	t.Helper()
	_, err := h.agent.SyncPod(h.ctx, key)
	return err
}

func (h *harness) phase(t *testing.T, name string) corev1.PodPhase {
	t.Helper()
	pod, err := h.kube.CoreV1().Pods("ns").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Status.Phase
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// testPod is a pending pod on the agent's node with one container that
// uses each of its claims, named after them.
func testPod(name string, claims ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c})
	}
	return pod
}

// testClaim is allocated with one device of each driver and reserved
// for the pods.
func testClaim(name string, drivers []string, pods ...*corev1.Pod) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Status:     resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}},
	}
	for _, d := range drivers {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourcev1.DeviceRequestAllocationResult{Request: "req", Driver: d, Pool: node, Device: "dev-0"})
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// TestDrivers: one prepare call per driver and pod with that driver's
// claims; a driver that is not registered keeps the pod Pending with an
// event naming it, unless the agent leaves unknown drivers out; the
// drivers' CDI device IDs are shown in an event.
func TestDrivers(t *testing.T) {
	tests := []struct {
		name             string
		claimDrivers     map[string][]string
		onlyKnown        bool
		fail             map[string]string
		wantPhase        corev1.PodPhase
		wantGPUCalls     []string
		wantNICCalls     []string
		wantEventsPrefix []string
	}{
		{
			name:         "two drivers, one call each",
			claimDrivers: map[string][]string{"a": {gpus}, "b": {gpus, nics}, "c": {nics}},
			wantPhase:    corev1.PodRunning,
			wantGPUCalls: []string{"a,b"}, wantNICCalls: []string{"b,c"},
			wantEventsPrefix: []string{"Normal PreparedDynamicResources Prepared claim a request req: gpu.example.com/node-a/dev-0: CDI gpu.example.com/gpu=dev-0; " +
				"claim b request req: gpu.example.com/node-a/dev-0: CDI gpu.example.com/gpu=dev-0; claim b request req: nic.example.com/node-a/dev-0: CDI nic.example.com/gpu=dev-0; " +
				"claim c request req: nic.example.com/node-a/dev-0: CDI nic.example.com/gpu=dev-0"},
		},
		{
			name:             "driver not registered: Pending, no driver called",
			claimDrivers:     map[string][]string{"a": {gpus}, "b": {missing}},
			wantPhase:        corev1.PodPending,
			wantEventsPrefix: []string{"Warning FailedPrepareDynamicResources Failed to prepare claim b with driver missing.example.com: driver missing.example.com is not registered on node node-a"},
		},
		{
			name:             "driver not registered, left out",
			claimDrivers:     map[string][]string{"a": {gpus}, "b": {missing}},
			onlyKnown:        true,
			wantPhase:        corev1.PodRunning,
			wantGPUCalls:     []string{"a"},
			wantEventsPrefix: []string{"Normal PreparedDynamicResources Prepared claim a request req: gpu.example.com/node-a/dev-0: CDI gpu.example.com/gpu=dev-0"},
		},
		{
			name:         "a claim fails: Pending, the event names claim and driver",
			claimDrivers: map[string][]string{"a": {gpus}, "b": {nics}},
			fail:         map[string]string{"b": "link down"},
			wantPhase:    corev1.PodPending,
			wantGPUCalls: []string{"a"}, wantNICCalls: []string{"b"},
			wantEventsPrefix: []string{"Warning FailedPrepareDynamicResources Failed to prepare claim b with driver nic.example.com: link down"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gpu := &drivertesting.RecordingPreparer{Driver: gpus, Fail: tc.fail}
			nic := &drivertesting.RecordingPreparer{Driver: nics, Fail: tc.fail}
			names := slices.Sorted(func(yield func(string) bool) {
				for name := range tc.claimDrivers {
					if !yield(name) {
						return
					}
				}
			})
			pod := testPod("p", names...)
			h := newHarness(t, Options{Drivers: DriverMap{gpus: gpu, nics: nic}, OnlyKnownDrivers: tc.onlyKnown}, pod)
			for _, name := range names {
				h.addClaims(t, testClaim(name, tc.claimDrivers[name], pod))
			}
			err := h.sync(t, "ns/p")
			if (err != nil) != (tc.wantPhase == corev1.PodPending) {
				t.Errorf("sync: %v", err)
			}
			if got := h.phase(t, "p"); got != tc.wantPhase {
				t.Errorf("phase %q, want %q", got, tc.wantPhase)
			}
			for _, c := range []struct {
				driver *drivertesting.RecordingPreparer
				want   []string
			}{{gpu, tc.wantGPUCalls}, {nic, tc.wantNICCalls}} {
				var got []string
				for _, call := range c.driver.PrepareCalls() {
					got = append(got, strings.Join(call, ","))
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("%s: prepare calls %q, want %q", c.driver.Driver, got, c.want)
				}
			}
			if got := h.events(); !slices.Equal(got, tc.wantEventsPrefix) {
				t.Errorf("events:\n%q\nwant:\n%q", got, tc.wantEventsPrefix)
			}
		})
	}
}

// TestCheckpoint: an agent that restarts with the checkpoint of the one
// before unprepares, once, the claims of a pod deleted while it was down;
// does not prepare again the claims of a pod that runs on, nor those of a
// pod prepared before the restart but not marked Running yet; and a pod
// created again under the same name (another UID) gets the old claims
// unprepared before its own are prepared.
func TestCheckpoint(t *testing.T) {
	checkpoint := filepath.Join(t.TempDir(), "agent", "checkpoint.json")
	deleted, survivor, notStarted, recreated := testPod("deleted", "c1"), testPod("survivor", "c2"), testPod("not-started", "c3"), testPod("recreated", "c4")
	claims := []*resourcev1.ResourceClaim{testClaim("c1", []string{gpus}, deleted), testClaim("c2", []string{gpus}, survivor),
		testClaim("c3", []string{gpus}, notStarted), testClaim("c4", []string{gpus}, recreated)}

	first := &drivertesting.RecordingPreparer{Driver: gpus}
	h := newHarness(t, Options{Drivers: DriverMap{gpus: first}, Checkpoint: checkpoint}, deleted, survivor, notStarted, recreated)
	h.addClaims(t, claims...)
	for _, key := range []string{"ns/deleted", "ns/survivor", "ns/not-started", "ns/recreated"} {
		if err := h.sync(t, key); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(first.PrepareCalls()); got != 4 {
		t.Fatalf("%d prepare calls before the restart, want 4", got)
	}

	// After the restart: "deleted" is gone, "survivor" runs, "not-started"
	// is still Pending (its status write was lost), "recreated" is a new
	// pod of the same name.
	running := RunningStatus(survivor, h.agent.clock.Now())
	newPod := testPod("recreated", "c4")
	newPod.UID = "uid-recreated-2"
	second := &drivertesting.RecordingPreparer{Driver: gpus}
	h2 := newHarness(t, Options{Drivers: DriverMap{gpus: second}, Checkpoint: checkpoint}, running, notStarted, newPod)
	h2.addClaims(t, claims[1], claims[2], testClaim("c4", []string{gpus}, newPod))
	// Run queues the checkpoint's pods first; with a cancelled context
	// its workers stop at once and the test syncs the pods itself.
	h2.agent.Run(cancelled(h2.ctx), 1)
	h2.agent.SetRecorder(h2.recorder)
	if keys := h2.agent.queue.Len(); keys != 4 {
		t.Errorf("%d pods queued from the checkpoint at start, want 4", keys)
	}
	for _, key := range []string{"ns/deleted", "ns/survivor", "ns/not-started", "ns/recreated"} {
		if err := h2.sync(t, key); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := second.UnprepareCalls(), [][]string{{"c1"}, {"c4"}}; !equalCalls(got, want) {
		t.Errorf("unprepare calls after the restart %q, want %q (the deleted pod's claim once, the replaced pod's once)", got, want)
	}
	if got, want := second.PrepareCalls(), [][]string{{"c4"}}; !equalCalls(got, want) {
		t.Errorf("prepare calls after the restart %q, want %q (only the new pod's)", got, want)
	}
	if got := h2.phase(t, "not-started"); got != corev1.PodRunning {
		t.Errorf("pod prepared before the restart: phase %q, want Running without preparing again", got)
	}
	if got := h2.phase(t, "recreated"); got != corev1.PodRunning {
		t.Errorf("pod created again under the same name: phase %q after one sync, want Running", got)
	}
}

func cancelled(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	return ctx
}

func equalCalls(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

// TestDeviceHealth: health a driver reports for a pod's device shows in
// the status of the container that uses it, as the kubelet shows it.
func TestDeviceHealth(t *testing.T) {
	pod := testPod("p", "c")
	h := newHarness(t, Options{Drivers: DriverMap{gpus: &drivertesting.RecordingPreparer{}}}, pod)
	h.addClaims(t, testClaim("c", []string{gpus}, pod))
	if err := h.sync(t, "ns/p"); err != nil {
		t.Fatal(err)
	}
	started, err := h.kube.CoreV1().Pods("ns").Get(h.ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := started.Status.ContainerStatuses[0].AllocatedResourcesStatus; got != nil {
		t.Errorf("no health reported yet, got %v", got)
	}
	h.addPod(t, started)
	h.agent.SetDeviceHealth(gpus, []DeviceHealth{{Pool: node, Device: "dev-0", Health: corev1.ResourceHealthStatusUnhealthy}})
	if err := h.sync(t, "ns/p"); err != nil {
		t.Fatal(err)
	}
	got, err := h.kube.CoreV1().Pods("ns").Get(h.ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Named after the container's entry of resources.claims, which names
	// the pod claim and no request, as the API requires.
	want := []corev1.ResourceStatus{{Name: "claim:c", Resources: []corev1.ResourceHealth{
		{ResourceID: "gpu.example.com/node-a/dev-0", Health: corev1.ResourceHealthStatusUnhealthy}}}}
	if status := got.Status.ContainerStatuses[0].AllocatedResourcesStatus; !slices.EqualFunc(status, want, func(x, y corev1.ResourceStatus) bool {
		return x.Name == y.Name && slices.Equal(x.Resources, y.Resources)
	}) {
		t.Errorf("allocatedResourcesStatus %+v, want %+v", status, want)
	}
}

// TestSharedClaim: as the kubelet, a claim that several pods of the node
// use is prepared once, by the first of them, and unprepared once, when
// the last of them is gone, also across a restart from the checkpoint.
func TestSharedClaim(t *testing.T) {
	checkpoint := filepath.Join(t.TempDir(), "checkpoint.json")
	p1, p2, p3 := testPod("p1", "own", "shared"), testPod("p2", "shared"), testPod("p3", "shared")
	claims := []*resourcev1.ResourceClaim{testClaim("own", []string{gpus}, p1), testClaim("shared", []string{gpus}, p1, p2, p3)}
	gpu := &drivertesting.RecordingPreparer{Driver: gpus}
	h := newHarness(t, Options{Drivers: DriverMap{gpus: gpu}, Checkpoint: checkpoint}, p1, p2, p3)
	h.addClaims(t, claims...)
	for _, key := range []string{"ns/p1", "ns/p2", "ns/p3"} {
		if err := h.sync(t, key); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := gpu.PrepareCalls(), [][]string{{"own", "shared"}}; !equalCalls(got, want) {
		t.Errorf("prepare calls %q, want %q (the shared claim once)", got, want)
	}
	for _, name := range []string{"p1", "p2", "p3"} {
		if got := h.phase(t, name); got != corev1.PodRunning {
			t.Errorf("pod %s: phase %q, want Running", name, got)
		}
	}
	for _, pod := range []*corev1.Pod{p1, p2} {
		if err := h.pods.Delete(pod); err != nil {
			t.Fatal(err)
		}
		if err := h.sync(t, "ns/"+pod.Name); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := gpu.UnprepareCalls(), [][]string{{"own"}}; !equalCalls(got, want) {
		t.Errorf("unprepare calls with p3 left %q, want %q (the shared claim stays prepared)", got, want)
	}

	// A restarted agent knows from the checkpoint that p3 holds it; p3
	// goes while it is down.
	second := &drivertesting.RecordingPreparer{Driver: gpus}
	h2 := newHarness(t, Options{Drivers: DriverMap{gpus: second}, Checkpoint: checkpoint})
	if err := h2.sync(t, "ns/p3"); err != nil {
		t.Fatal(err)
	}
	if got, want := second.UnprepareCalls(), [][]string{{"shared"}}; !equalCalls(got, want) {
		t.Errorf("unprepare calls once the last pod is gone %q, want %q", got, want)
	}
	if got := second.PrepareCalls(); len(got) != 0 {
		t.Errorf("prepare calls after the restart %q, want none", got)
	}
}

// TestFinishDeletionWithoutClaims: where the agent finishes deletions (a
// kube-apiserver's nodes), a deleted pod without claims is removed too,
// as a kubelet removes every pod of its node; elsewhere it is left alone.
func TestFinishDeletionWithoutClaims(t *testing.T) {
	for _, finish := range []bool{true, false} {
		t.Run(fmt.Sprintf("FinishDeletions=%v", finish), func(t *testing.T) {
			pod := testPod("plain")
			pod.Status.Phase = corev1.PodRunning
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			h := newHarness(t, Options{Drivers: DriverMap{gpus: &drivertesting.RecordingPreparer{Driver: gpus}}, FinishDeletions: finish}, pod)
			h.agent.enqueuePod(pod)
			if got, want := h.agent.queue.Len(), map[bool]int{true: 1, false: 0}[finish]; got != want {
				t.Fatalf("%d pods queued, want %d", got, want)
			}
			if err := h.sync(t, "ns/plain"); err != nil {
				t.Fatal(err)
			}
			_, err := h.kube.CoreV1().Pods("ns").Get(h.ctx, "plain", metav1.GetOptions{})
			if gone := apierrors.IsNotFound(err); gone != finish {
				t.Errorf("pod removed: %v, want %v (get: %v)", gone, finish, err)
			}
		})
	}
}
