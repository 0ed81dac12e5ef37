package devicetainteviction

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// The tests drive the controller step by step: the informers are not
// started, the test puts objects into their caches and calls the event
// handlers as the informers would; a fake queue hands out work items in
// order and releases delayed ones only when the test moves the fake
// clock. Nothing depends on real time.

// t0 is when every test starts.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const (
	testDriver    = "gpu.example.com"
	testPool      = "node-1"
	testNamespace = "default"
)

// testQueue is a workQueue without goroutines: Add appends (once),
// AddAfter waits for the fake clock.
type testQueue struct {
	clock   *testingclock.FakeClock
	ready   []string
	delayed map[string]time.Time
}

func (q *testQueue) Add(item string) {
	if !slices.Contains(q.ready, item) {
		q.ready = append(q.ready, item)
	}
}

func (q *testQueue) AddAfter(item string, d time.Duration) {
	if d <= 0 {
		q.Add(item)
		return
	}
	due := q.clock.Now().Add(d)
	if current, ok := q.delayed[item]; !ok || due.Before(current) {
		q.delayed[item] = due
	}
}

func (q *testQueue) AddRateLimited(item string) { q.AddAfter(item, time.Second) }
func (q *testQueue) Forget(string)              {}
func (q *testQueue) Done(string)                {}
func (q *testQueue) ShutDown()                  {}
func (q *testQueue) Get() (string, bool) {
	if len(q.ready) == 0 {
		return "", true
	}
	item := q.ready[0]
	q.ready = q.ready[1:]
	return item, false
}

// releaseDue moves the delayed items that are due to the ready list, in
// due order.
func (q *testQueue) releaseDue() {
	var due []string
	for item, at := range q.delayed {
		if !at.After(q.clock.Now()) {
			due = append(due, item)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !q.delayed[due[i]].Equal(q.delayed[due[j]]) {
			return q.delayed[due[i]].Before(q.delayed[due[j]])
		}
		return due[i] < due[j]
	})
	for _, item := range due {
		delete(q.delayed, item)
		q.Add(item)
	}
}

type testEnv struct {
	t        *testing.T
	ctx      context.Context
	c        *Controller
	queue    *testQueue
	clock    *testingclock.FakeClock
	kube     *kubefake.Clientset
	resource *resourcefake.Clientset
	recorder *record.FakeRecorder
	// events collects everything the recorder got, in order.
	events []string

	pods, claims, slices, rules cache.Indexer
}

type testObjects struct {
	pods   []*corev1.Pod
	claims []*resourcev1.ResourceClaim
	slices []*resourcev1.ResourceSlice
	rules  []*resourcev1.DeviceTaintRule
	// staleCache keeps deleted pods in the cache unchanged, as an
	// informer that has not caught up yet would.
	staleCache bool
}

func newTestEnv(t *testing.T, opts Options, objects testObjects) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var kubeObjects, resourceObjects []runtime.Object
	for _, pod := range objects.pods {
		kubeObjects = append(kubeObjects, pod.DeepCopy())
	}
	for _, claim := range objects.claims {
		resourceObjects = append(resourceObjects, claim.DeepCopy())
	}
	for _, slice := range objects.slices {
		resourceObjects = append(resourceObjects, slice.DeepCopy())
	}
	for _, rule := range objects.rules {
		resourceObjects = append(resourceObjects, rule.DeepCopy())
	}
	kube := kubefake.NewClientset(kubeObjects...)
	resource := resourcefake.NewClientset(resourceObjects...)
	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resource, 0)
	podInformer := kubeInformers.Core().V1().Pods()
	claimInformer := resourceInformers.Resource().V1().ResourceClaims()
	sliceInformer := resourceInformers.Resource().V1().ResourceSlices()
	ruleInformer := resourceInformers.Resource().V1().DeviceTaintRules()

	clock := testingclock.NewFakeClock(t0)
	c, err := newController(kube, resource, podInformer, claimInformer, sliceInformer, ruleInformer, opts, clock)
	if err != nil {
		t.Fatalf("newController: %v", err)
	}
	e := &testEnv{
		t: t, ctx: ctx, c: c, clock: clock, kube: kube, resource: resource,
		queue:    &testQueue{clock: clock, delayed: map[string]time.Time{}},
		recorder: record.NewFakeRecorder(1000),
		pods:     podInformer.Informer().GetIndexer(),
		claims:   claimInformer.Informer().GetIndexer(),
		slices:   sliceInformer.Informer().GetIndexer(),
		rules:    ruleInformer.Informer().GetIndexer(),
	}
	c.queue = e.queue
	c.recorder = e.recorder

	// A deleted pod leaves the cache as it would with a running informer.
	kube.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteAction)
		if objects.staleCache {
			return false, nil, nil
		}
		if obj, exists, _ := e.pods.GetByKey(del.GetNamespace() + "/" + del.GetName()); exists {
			_ = e.pods.Delete(obj)
			defer c.onPod(klog.FromContext(ctx), obj, true)
		}
		return false, nil, nil
	})

	logger := klog.FromContext(ctx)
	for _, pod := range objects.pods {
		e.add(e.pods, pod)
		c.onPod(logger, pod, false)
	}
	for _, slice := range objects.slices {
		e.add(e.slices, slice)
		c.onSlice(logger, nil, slice)
	}
	// Rules last, so that their first status already sees the pods.
	for _, claim := range objects.claims {
		e.add(e.claims, claim)
		c.onClaim(logger, nil, claim)
	}
	for _, rule := range objects.rules {
		e.add(e.rules, rule)
		if c.watchesRules {
			c.onRule(logger, nil, rule)
		}
	}
	return e
}

func (e *testEnv) add(indexer cache.Indexer, obj any) {
	e.t.Helper()
	if err := indexer.Add(obj); err != nil {
		e.t.Fatalf("add to cache: %v", err)
	}
}

// drain processes ready work items until there are none.
func (e *testEnv) drain() {
	e.t.Helper()
	for range 10000 {
		if !e.c.processNextItem(e.ctx) {
			e.collectEvents()
			return
		}
	}
	e.t.Fatalf("work queue does not drain, still has %v", e.queue.ready)
}

// advance moves the clock and processes what became due.
func (e *testEnv) advance(d time.Duration) {
	e.t.Helper()
	e.clock.Step(d)
	e.queue.releaseDue()
	e.drain()
}

func (e *testEnv) collectEvents() {
	for {
		select {
		case event := <-e.recorder.Events:
			e.events = append(e.events, event)
		default:
			return
		}
	}
}

// deletedPods lists the pods deleted so far, in order.
func (e *testEnv) deletedPods() []string {
	var names []string
	for _, action := range e.kube.Actions() {
		if del, ok := action.(k8stesting.DeleteAction); ok && action.GetResource().Resource == "pods" {
			names = append(names, del.GetName())
		}
	}
	return names
}

// pendingPods lists the pods with a pending eviction, sorted.
func (e *testEnv) pendingPods() []string {
	e.c.mutex.Lock()
	defer e.c.mutex.Unlock()
	var names []string
	for key := range e.c.pending {
		_, name, _ := strings.Cut(key, "/")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (e *testEnv) eventsWithReason(reason string) []string {
	var found []string
	for _, event := range e.events {
		if strings.Contains(event, " "+reason+" ") {
			found = append(found, event)
		}
	}
	return found
}

// ruleCondition returns the EvictionInProgress condition as stored.
func (e *testEnv) ruleCondition(name string) *metav1.Condition {
	e.t.Helper()
	rule, err := e.resource.ResourceV1().DeviceTaintRules().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get rule %s: %v", name, err)
	}
	for i := range rule.Status.Conditions {
		if rule.Status.Conditions[i].Type == "EvictionInProgress" {
			return &rule.Status.Conditions[i]
		}
	}
	return nil
}

// Object builders.

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid")},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "ctr", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func consumer(name string) resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: name, UID: types.UID(name + "-uid")}
}

// claim is allocated with the devices (names in testPool) and reserved
// for the consumers.
func claim(name string, devices []string, consumers ...resourcev1.ResourceClaimConsumerReference) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid")},
		Status: resourcev1.ResourceClaimStatus{
			Allocation:  &resourcev1.AllocationResult{},
			ReservedFor: consumers,
		},
	}
	for _, device := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpu", Driver: testDriver, Pool: testPool, Device: device,
		})
	}
	return c
}

func withTolerations(c *resourcev1.ResourceClaim, tolerations ...resourcev1.DeviceToleration) *resourcev1.ResourceClaim {
	for i := range c.Status.Allocation.Devices.Results {
		c.Status.Allocation.Devices.Results[i].Tolerations = tolerations
	}
	return c
}

func noExecute(key string) resourcev1.DeviceTaint {
	return resourcev1.DeviceTaint{Key: key, Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}}
}

func taintWithEffect(key string, effect resourcev1.DeviceTaintEffect) resourcev1.DeviceTaint {
	taint := noExecute(key)
	taint.Effect = effect
	return taint
}

// rule taints the named device of testPool; device "" selects the whole
// driver.
func rule(name, device string, taint resourcev1.DeviceTaint) *resourcev1.DeviceTaintRule {
	r := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Generation: 1, CreationTimestamp: metav1.Time{Time: t0}},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(testDriver)},
			Taint:          taint,
		},
	}
	if device != "" {
		r.Spec.DeviceSelector.Pool = ptr.To(testPool)
		r.Spec.DeviceSelector.Device = ptr.To(device)
	}
	return r
}

// slice publishes gpu-0..gpu-(n-1) in testPool with the generation; the
// taints go onto gpu-0.
func slice(name string, generation int64, n int, taints ...resourcev1.DeviceTaint) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.Time{Time: t0}},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   testDriver,
			Pool:     resourcev1.ResourcePool{Name: testPool, Generation: generation, ResourceSliceCount: 1},
			NodeName: ptr.To("node-1"),
		},
	}
	for i := range n {
		device := resourcev1.Device{Name: "gpu-" + string(rune('0'+i))}
		if i == 0 {
			device.Taints = taints
		}
		s.Spec.Devices = append(s.Spec.Devices, device)
	}
	return s
}
