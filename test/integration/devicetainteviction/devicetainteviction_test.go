// Package devicetainteviction runs the device taint eviction controller
// against the real dra-apiserver (in-process, embedded etcd). The first
// tests write claim allocations directly, so that a claim can be reserved
// for a pod that no longer exists; the last one adds the resource claim
// and allocation controllers to show what a NoSchedule taint does to new
// allocations.
package devicetainteviction

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/controllers/allocation"
	"github.com/draplane/draplane/internal/controllers/devicetainteviction"
	"github.com/draplane/draplane/internal/controllers/resourceclaim"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/integration/framework"
)

// pollTimeout only keeps a broken controller from hanging the run;
// nothing depends on how fast things happen.
const pollTimeout = 2 * time.Minute

type env struct {
	config   *rest.Config
	kube     kubernetes.Interface
	resource versioned.Interface
	// allocationTaintRules is the allocation controller's cache of
	// rules, once started: a case that creates a rule and then a pod
	// waits for it, or the pod may be placed before the controller
	// sees the rule (kube-scheduler has the same window).
	allocationTaintRules resourcelisters.DeviceTaintRuleLister
}

func TestDeviceTaintEviction(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	e := startServer(ctx, t, &wg, false)
	startEvictionController(ctx, t, &wg, e)

	t.Run("NoExecute rule evicts every consumer of a shared claim", func(t *testing.T) { testSharedClaim(ctx, t, e) })
	t.Run("tolerationSeconds delay eviction", func(t *testing.T) { testTolerationSeconds(ctx, t, e) })
	t.Run("deleting the rule cancels a pending eviction", func(t *testing.T) { testCancel(ctx, t, e) })
	t.Run("empty selector needs confirmation", func(t *testing.T) { testSelectAllConfirmation(ctx, t, e) })
	// Last: the resource claim controller would drop the missing
	// consumer that the first test depends on.
	startAllocationControllers(ctx, t, &wg, e)
	t.Run("NoSchedule evicts nothing and blocks new allocations", func(t *testing.T) { testNoSchedule(ctx, t, e) })
}

// startEvictionController runs the controller as the server would, with a
// short status interval so that the test sees the final counts soon.
func startEvictionController(ctx context.Context, t *testing.T, wg *sync.WaitGroup, e *env) {
	t.Helper()
	kubeInformers := informers.NewSharedInformerFactory(e.kube, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(e.resource, 0)
	controller, err := devicetainteviction.NewController(klog.FromContext(ctx), e.kube, e.resource,
		kubeInformers.Core().V1().Pods(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().ResourceSlices(),
		resourceInformers.Resource().V1().DeviceTaintRules(),
		devicetainteviction.Options{StatusUpdateInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	startInformers(ctx, wg, kubeInformers, resourceInformers)
	wg.Go(func() { controller.Run(ctx, 2) })
}

func startAllocationControllers(ctx context.Context, t *testing.T, wg *sync.WaitGroup, e *env) {
	t.Helper()
	logger := klog.FromContext(ctx)
	kubeInformers := informers.NewSharedInformerFactory(e.kube, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(e.resource, 0)
	claimController, err := resourceclaim.NewController(logger, e.kube, e.resource,
		kubeInformers.Core().V1().Pods(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		t.Fatalf("resourceclaim.NewController: %v", err)
	}
	allocationController, err := allocation.NewController(logger, e.kube, e.resource,
		kubeInformers.Core().V1().Pods(),
		kubeInformers.Core().V1().Nodes(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().DeviceClasses(),
		resourceInformers.Resource().V1().ResourceSlices(),
		resourceInformers.Resource().V1().DeviceTaintRules(),
		allocation.Options{MaxRetryDelay: time.Second})
	if err != nil {
		t.Fatalf("allocation.NewController: %v", err)
	}
	e.allocationTaintRules = resourceInformers.Resource().V1().DeviceTaintRules().Lister()
	startInformers(ctx, wg, kubeInformers, resourceInformers)
	wg.Go(func() { claimController.Run(ctx, 2) })
	wg.Go(func() { allocationController.Run(ctx, 2) })
}

func startInformers(ctx context.Context, wg *sync.WaitGroup, kubeInformers informers.SharedInformerFactory, resourceInformers resourceinformers.SharedInformerFactory) {
	kubeInformers.Start(ctx.Done())
	resourceInformers.Start(ctx.Done())
	wg.Go(func() {
		<-ctx.Done()
		kubeInformers.Shutdown()
		resourceInformers.Shutdown()
	})
}

// fixture is one test's namespace, driver and pool.
type fixture struct {
	namespace, driver, pool string
}

func newFixture(ctx context.Context, t *testing.T, e *env, name string) fixture {
	t.Helper()
	f := fixture{namespace: name, driver: name + ".example.com", pool: name + "-pool"}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	// The node does not exist: nothing else may use these devices.
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   f.driver,
			Pool:     resourcev1.ResourcePool{Name: f.pool, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(name + "-node"),
			Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	if _, err := e.resource.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create slice: %v", err)
	}
	return f
}

// createPod creates a running pod on the fixture's node that uses the
// claim.
func (f fixture) createPod(ctx context.Context, t *testing.T, e *env, name, claim string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace},
		Spec: corev1.PodSpec{
			NodeName:       f.namespace + "-node",
			Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}},
		},
	}
	pod, err := e.kube.CoreV1().Pods(f.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod, err = e.kube.CoreV1().Pods(f.namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("report pod %s running: %v", name, err)
	}
	return pod
}

// createAllocatedClaim does what the allocation controller would: a claim
// allocated with gpu-0, with the tolerations, reserved for the consumers
// in the order given.
func (f fixture) createAllocatedClaim(ctx context.Context, t *testing.T, e *env, name string, tolerations []resourcev1.DeviceToleration, consumers ...resourcev1.ResourceClaimConsumerReference) {
	t.Helper()
	claims := e.resource.ResourceV1().ResourceClaims(f.namespace)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace, Finalizers: []string{resourceapi.Finalizer}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", Tolerations: tolerations},
		}}}},
	}
	claim, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create claim %s: %v", name, err)
	}
	now := metav1.Now()
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: f.driver, Pool: f.pool, Device: "gpu-0", Tolerations: tolerations,
		}}},
		AllocationTimestamp: &now,
	}
	claim.Status.ReservedFor = consumers
	if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocate and reserve claim %s: %v", name, err)
	}
}

func (f fixture) createRule(ctx context.Context, t *testing.T, e *env, name string, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	t.Helper()
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: &f.driver, Pool: &f.pool, Device: ptr.To("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Value: "fan", Effect: effect},
		},
	}
	rule, err := e.resource.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create rule %s: %v", name, err)
	}
	return rule
}

func podRef(pod *corev1.Pod) resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}

// waitEvicted waits until the pod instance is gone or terminating and
// returns its DisruptionTarget condition if it could still be read.
func waitEvicted(ctx context.Context, t *testing.T, e *env, pod *corev1.Pod) *corev1.PodCondition {
	t.Helper()
	var condition *corev1.PodCondition
	testenv.WaitFor(ctx, t, pollTimeout, "eviction of pod "+pod.Name, func() (bool, error) {
		current, err := e.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && current.UID != pod.UID {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		condition = disruptionTarget(current)
		return current.DeletionTimestamp != nil, nil
	})
	return condition
}

func disruptionTarget(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.DisruptionTarget {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// waitRuleCondition waits until the rule's EvictionInProgress condition
// has the reason and message, and logs it.
func waitRuleCondition(ctx context.Context, t *testing.T, e *env, name, reason, message string) metav1.Condition {
	t.Helper()
	var last metav1.Condition
	testenv.WaitFor(ctx, t, pollTimeout, fmt.Sprintf("rule %s condition %s %q", name, reason, message), func() (bool, error) {
		rule, err := e.resource.ResourceV1().DeviceTaintRules().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		condition := meta.FindStatusCondition(rule.Status.Conditions, resourceapi.DeviceTaintConditionEvictionInProgress)
		if condition == nil {
			return false, nil
		}
		if condition.Reason != last.Reason || condition.Message != last.Message {
			t.Logf("DeviceTaintRule %s now: %s reason=%s message=%q", name, condition.Status, condition.Reason, condition.Message)
		}
		last = *condition
		return condition.Reason == reason && condition.Message == message && condition.ObservedGeneration == rule.Generation, nil
	})
	t.Logf("DeviceTaintRule %s: %s=%s reason=%s message=%q", name, last.Type, last.Status, last.Reason, last.Message)
	return last
}

func waitPodEvent(ctx context.Context, t *testing.T, e *env, pod *corev1.Pod, reason string) string {
	t.Helper()
	var message string
	testenv.WaitFor(ctx, t, pollTimeout, "event "+reason+" for pod "+pod.Name, func() (bool, error) {
		events, err := e.kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, event := range events.Items {
			if event.InvolvedObject.Name == pod.Name && event.InvolvedObject.UID == pod.UID && event.Reason == reason {
				message = event.Message
				return true, nil
			}
		}
		return false, nil
	})
	return message
}

// testSharedClaim: the claim names a pod that no longer exists first,
// then three live pods; all three must go.
func testSharedClaim(ctx context.Context, t *testing.T, e *env) {
	f := newFixture(ctx, t, e, "shared")
	ghost := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: "ghost", UID: types.UID("00000000-0000-0000-0000-00000000dead")}
	pods := []*corev1.Pod{f.createPod(ctx, t, e, "worker-0", "shared"), f.createPod(ctx, t, e, "worker-1", "shared"), f.createPod(ctx, t, e, "worker-2", "shared")}
	f.createAllocatedClaim(ctx, t, e, "shared", nil, ghost, podRef(pods[0]), podRef(pods[1]), podRef(pods[2]))

	f.createRule(ctx, t, e, "shared-gpu-0", resourcev1.DeviceTaintEffectNoExecute)
	for _, pod := range pods {
		condition := waitEvicted(ctx, t, e, pod)
		if condition != nil && (condition.Status != corev1.ConditionTrue || condition.Reason != devicetainteviction.PodConditionReason) {
			t.Errorf("pod %s: DisruptionTarget %+v, want True/%s", pod.Name, condition, devicetainteviction.PodConditionReason)
		}
	}
	waitRuleCondition(ctx, t, e, "shared-gpu-0", devicetainteviction.ReasonCompleted, "0 pods pending eviction, 3 pods evicted, 0 evictions cancelled")

	// Events about a cluster-scoped object land in namespace default.
	testenv.WaitFor(ctx, t, pollTimeout, "an event on the rule for each evicted pod", func() (bool, error) {
		events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		evicted := map[string]bool{}
		for _, event := range events.Items {
			if event.InvolvedObject.Kind == "DeviceTaintRule" && event.InvolvedObject.Name == "shared-gpu-0" && event.Reason == devicetainteviction.ReasonRulePodEvicted {
				evicted[event.Message] = true
			}
		}
		return len(evicted) == len(pods), nil
	})
}

// testTolerationSeconds: the claim tolerates the taint for 5 seconds, so
// the pod is marked no earlier than 5 seconds after the taint was added.
// The check compares the times the server stored, not the test's clock.
func testTolerationSeconds(ctx context.Context, t *testing.T, e *env) {
	f := newFixture(ctx, t, e, "delayed")
	pod := f.createPod(ctx, t, e, "trainer", "tolerating")
	f.createAllocatedClaim(ctx, t, e, "tolerating", []resourcev1.DeviceToleration{{
		Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5),
	}}, podRef(pod))

	rule := f.createRule(ctx, t, e, "delayed-gpu-0", resourcev1.DeviceTaintEffectNoExecute)
	if rule.Spec.Taint.TimeAdded == nil {
		t.Fatalf("server did not set timeAdded: %+v", rule.Spec.Taint)
	}
	condition := waitEvicted(ctx, t, e, pod)
	if condition == nil {
		t.Fatalf("pod %s evicted without DisruptionTarget condition", pod.Name)
	}
	due := rule.Spec.Taint.TimeAdded.Add(5 * time.Second)
	if condition.LastTransitionTime.Time.Before(due) {
		t.Errorf("pod marked for eviction at %s, before the toleration ran out at %s", condition.LastTransitionTime, due)
	}
	t.Logf("taint added %s, pod marked %s: %s", rule.Spec.Taint.TimeAdded, condition.LastTransitionTime, condition.Message)
	waitRuleCondition(ctx, t, e, "delayed-gpu-0", devicetainteviction.ReasonCompleted, "0 pods pending eviction, 1 pods evicted, 0 evictions cancelled")
}

// testCancel: the eviction is pending (a long toleration, so that the
// test cannot be too slow to delete the rule in time); deleting the rule
// cancels it, which the pod's events record, and the pod stays.
func testCancel(ctx context.Context, t *testing.T, e *env) {
	f := newFixture(ctx, t, e, "cancel")
	pod := f.createPod(ctx, t, e, "server", "tolerating")
	f.createAllocatedClaim(ctx, t, e, "tolerating", []resourcev1.DeviceToleration{{
		Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists, TolerationSeconds: ptr.To[int64](3600),
	}}, podRef(pod))

	f.createRule(ctx, t, e, "cancel-gpu-0", resourcev1.DeviceTaintEffectNoExecute)
	waitRuleCondition(ctx, t, e, "cancel-gpu-0", devicetainteviction.ReasonPodsPendingEviction, "1 pods pending eviction, 0 pods evicted, 0 evictions cancelled")
	if err := e.resource.ResourceV1().DeviceTaintRules().Delete(ctx, "cancel-gpu-0", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete rule: %v", err)
	}
	message := waitPodEvent(ctx, t, e, pod, devicetainteviction.ReasonEvictionCancelled)
	t.Logf("pod event %s: %s", devicetainteviction.ReasonEvictionCancelled, message)
	current, err := e.kube.CoreV1().Pods(f.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod after cancelled eviction: %v", err)
	}
	if current.DeletionTimestamp != nil || disruptionTarget(current) != nil {
		t.Errorf("pod touched although the eviction was cancelled: deletionTimestamp=%v conditions=%+v", current.DeletionTimestamp, current.Status.Conditions)
	}
}

func testSelectAllConfirmation(ctx context.Context, t *testing.T, e *env) {
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "everything"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/drill", Effect: resourcev1.DeviceTaintEffectNone},
		},
	}
	_, err := e.resource.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "resource.draplane.dev/confirm-select-all-devices") {
		t.Fatalf("unconfirmed empty selector: got %v, want Invalid naming the annotation", err)
	}
	rule.Annotations = map[string]string{"resource.draplane.dev/confirm-select-all-devices": "true"}
	if _, err := e.resource.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatalf("confirmed empty selector: %v", err)
	}
	// Effect None: evicts nobody; remove it before anything else runs.
	if err := e.resource.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete rule: %v", err)
	}
}

// startServer runs dra-apiserver in this process; withControllers turns
// on the server's own controllers, otherwise the test starts the ones it
// needs.
func startServer(ctx context.Context, t *testing.T, wg *sync.WaitGroup, withControllers bool) *env {
	t.Helper()
	restConfig := framework.StartServer(ctx, t, wg, withControllers)
	return &env{config: restConfig, kube: kubernetes.NewForConfigOrDie(restConfig), resource: versioned.NewForConfigOrDie(restConfig)}
}
