package allocation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2/ktesting"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestAllocationController shares one server among the cases. Nodes,
// slices and classes are cluster-wide, so every case labels its own nodes
// and selects them with the pods' nodeSelector, and works in its own
// namespace.
func TestAllocationController(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	// The controllers stop before the server, so that they do not keep
	// writing to a server that is gone.
	controllerCtx, stopControllers := context.WithCancel(ctx)
	var serverWG, controllerWG sync.WaitGroup
	t.Cleanup(func() {
		stopControllers()
		controllerWG.Wait()
		cancel()
		serverWG.Wait()
	})
	config := StartServer(ctx, t, &serverWG)
	e := StartControllers(controllerCtx, t, &controllerWG, config, 2)
	e.CreateClass(ctx, t, "gpu")
	// Runs before the server stops: a failed case leaves what the
	// cluster looked like in the log.
	t.Cleanup(func() {
		if t.Failed() {
			dumpState(context.WithoutCancel(ctx), t, e)
		}
	})

	for _, test := range []struct {
		name string
		run  func(context.Context, *testing.T, *Env)
	}{
		{"template claim on 3 nodes x 2 GPUs", testTemplateClaim},
		{"7 pods on 6 GPUs", testSevenPods},
		{"CEL selector", testCELSelector},
		{"matchAttribute over 2 devices", testMatchAttribute},
		{"NoSchedule device taint", testDeviceTaint},
		{"DeviceTaintRule", testDeviceTaintRule},
		{"shared claim", testSharedClaim},
		{"pod with spec.nodeName", testPresetNode},
	} {
		t.Run(test.name, func(t *testing.T) { test.run(ctx, t, e) })
	}
}

// dumpState logs every pod's node and PodScheduled condition and every
// claim's allocation and consumers.
func dumpState(ctx context.Context, t *testing.T, e *Env) {
	pods, err := e.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("dump: list pods: %v", err)
		return
	}
	for _, pod := range pods.Items {
		condition := scheduledCondition(&pod)
		if condition == nil {
			condition = &corev1.PodCondition{}
		}
		t.Logf("dump: pod %s/%s node=%q deleting=%v PodScheduled=%s/%s %q", pod.Namespace, pod.Name, pod.Spec.NodeName, pod.DeletionTimestamp != nil, condition.Status, condition.Reason, condition.Message)
	}
	claims, err := e.Resource.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("dump: list claims: %v", err)
		return
	}
	for _, claim := range claims.Items {
		var devices []string
		if claim.Status.Allocation != nil {
			for _, result := range claim.Status.Allocation.Devices.Results {
				devices = append(devices, result.Pool+"/"+result.Device)
			}
		}
		t.Logf("dump: claim %s/%s rv=%s allocated=%v devices=%v reservedFor=%d deleting=%v finalizers=%v", claim.Namespace, claim.Name, claim.ResourceVersion, claim.Status.Allocation != nil, devices, len(claim.Status.ReservedFor), claim.DeletionTimestamp != nil, claim.Finalizers)
	}
}

// testCase is the namespace, node label and node names of one case.
type testCase struct {
	namespace string
	selector  map[string]string
	nodes     []string
}

func setUp(ctx context.Context, t *testing.T, e *Env, name string, nodes int, devices func(i int) []resourcev1.Device) testCase {
	t.Helper()
	tc := testCase{namespace: name, selector: map[string]string{"test": name}}
	e.CreateNamespace(ctx, t, name)
	for i := range nodes {
		node := fmt.Sprintf("%s-node-%d", name, i)
		e.CreateNode(ctx, t, node, tc.selector, devices(i))
		tc.nodes = append(tc.nodes, node)
	}
	for _, node := range tc.nodes {
		e.WaitNodeSeen(ctx, t, node)
	}
	return tc
}

func (tc testCase) createPod(ctx context.Context, t *testing.T, e *Env, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := e.Kube.CoreV1().Pods(tc.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return created
}

// waitBound waits until the pod is bound and returns it.
func waitBound(ctx context.Context, t *testing.T, e *Env, namespace, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	WaitFor(ctx, t, "pod "+name+" bound", func() (bool, error) {
		current, err := e.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = current
		return pod.Spec.NodeName != "", nil
	})
	return pod
}

// claimsOf returns the pod's claims in the order of its pod claims, as
// the pod status and spec name them.
func claimsOf(ctx context.Context, t *testing.T, e *Env, pod *corev1.Pod) []*resourcev1.ResourceClaim {
	t.Helper()
	var claims []*resourcev1.ResourceClaim
	for _, podClaim := range pod.Spec.ResourceClaims {
		name := ""
		if podClaim.ResourceClaimName != nil {
			name = *podClaim.ResourceClaimName
		}
		for _, status := range pod.Status.ResourceClaimStatuses {
			if status.Name == podClaim.Name && status.ResourceClaimName != nil {
				name = *status.ResourceClaimName
			}
		}
		if name == "" {
			t.Fatalf("pod %s: no claim for pod claim %s", pod.Name, podClaim.Name)
		}
		claim, err := e.Resource.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get claim %s: %v", name, err)
		}
		claims = append(claims, claim)
	}
	return claims
}

// checkAllocatedFor checks that the claim is allocated on the pod's node,
// protected and reserved for the pod, and returns the devices.
func checkAllocatedFor(t *testing.T, claim *resourcev1.ResourceClaim, pod *corev1.Pod) []resourcev1.DeviceRequestAllocationResult {
	t.Helper()
	allocation := claim.Status.Allocation
	if allocation == nil {
		t.Fatalf("claim %s of bound pod %s is not allocated", claim.Name, pod.Name)
	}
	for _, result := range allocation.Devices.Results {
		// Pools are named after their node.
		if result.Pool != pod.Spec.NodeName {
			t.Errorf("claim %s: device %s/%s is not on the pod's node %s", claim.Name, result.Pool, result.Device, pod.Spec.NodeName)
		}
	}
	if allocation.NodeSelector == nil || !strings.Contains(allocation.NodeSelector.String(), pod.Spec.NodeName) {
		t.Errorf("claim %s: allocation node selector %v does not name node %s", claim.Name, allocation.NodeSelector, pod.Spec.NodeName)
	}
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		t.Errorf("claim %s: allocated without the delete protection finalizer: %v", claim.Name, claim.Finalizers)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(c resourcev1.ResourceClaimConsumerReference) bool { return c.UID == pod.UID }) {
		t.Errorf("claim %s: not reserved for pod %s: %v", claim.Name, pod.Name, claim.Status.ReservedFor)
	}
	return allocation.Devices.Results
}

func checkNoDoubleAllocations(ctx context.Context, t *testing.T, e *Env, namespace string) {
	t.Helper()
	list, err := e.Resource.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	if doubles := DoubleAllocations(list.Items); len(doubles) > 0 {
		t.Errorf("devices allocated twice: %v", doubles)
	}
}

func scheduledCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// waitUnschedulable waits for PodScheduled=False with reason
// Unschedulable and a message that contains every want, and returns the
// message. An earlier attempt may have found the case's nodes not ready
// or its slices not seen yet and said so: that message is replaced once
// those arrive, so the wait is for the final reason, not the first.
func waitUnschedulable(ctx context.Context, t *testing.T, e *Env, namespace, name string, want ...string) string {
	t.Helper()
	var message string
	defer func() {
		if t.Failed() {
			t.Logf("pod %s: last PodScheduled=False message %q", name, message)
		}
	}()
	WaitFor(ctx, t, fmt.Sprintf("pod %s unschedulable with a message containing %q", name, want), func() (bool, error) {
		pod, err := e.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		condition := scheduledCondition(pod)
		if condition == nil || condition.Status != corev1.ConditionFalse || condition.Reason != corev1.PodReasonUnschedulable {
			return false, nil
		}
		message = condition.Message
		for _, w := range want {
			if !strings.Contains(message, w) {
				return false, nil
			}
		}
		return true, nil
	})
	return message
}

// waitWarning waits for a Warning event about the pod and returns its
// message.
func waitWarning(ctx context.Context, t *testing.T, e *Env, namespace, name, reason string) string {
	t.Helper()
	var message string
	WaitFor(ctx, t, "warning event "+reason+" for pod "+name, func() (bool, error) {
		events, err := e.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, event := range events.Items {
			if event.InvolvedObject.Name == name && event.Type == corev1.EventTypeWarning && event.Reason == reason {
				message = event.Message
				return true, nil
			}
		}
		return false, nil
	})
	return message
}

func testTemplateClaim(ctx context.Context, t *testing.T, e *Env) {
	tc := setUp(ctx, t, e, "one-pod", 3, func(int) []resourcev1.Device { return GPUs(2, nil) })
	e.CreateTemplate(ctx, t, tc.namespace, "gpu", OneDevice("gpu"))
	claimList, err := e.Resource.ResourceV1().ResourceClaims(tc.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	claimWatch, err := e.Resource.ResourceV1().ResourceClaims(tc.namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: claimList.ResourceVersion})
	if err != nil {
		t.Fatalf("watch claims: %v", err)
	}
	defer claimWatch.Stop()
	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "trainer", "gpu", tc.selector))

	pod := waitBound(ctx, t, e, tc.namespace, "trainer")
	checkWrittenOnceToAllocate(t, claimWatch)
	if !slices.Contains(tc.nodes, pod.Spec.NodeName) {
		t.Fatalf("pod bound to %s, not one of its nodes %v", pod.Spec.NodeName, tc.nodes)
	}
	if condition := scheduledCondition(pod); condition == nil || condition.Status != corev1.ConditionTrue {
		t.Errorf("bound pod: expected PodScheduled=True, got %+v", condition)
	}
	claims := claimsOf(ctx, t, e, pod)
	if results := checkAllocatedFor(t, claims[0], pod); len(results) != 1 {
		t.Errorf("expected one device, got %v", results)
	}
}

// checkWrittenOnceToAllocate: the claim generated from the template is
// created with the delete protection, so the allocation and reservation
// are the first and only write of it that follows.
func checkWrittenOnceToAllocate(t *testing.T, claimWatch watch.Interface) {
	t.Helper()
	var writes []string
	for event := range claimWatch.ResultChan() {
		claim, ok := event.Object.(*resourcev1.ResourceClaim)
		if !ok {
			t.Fatalf("unexpected watch event %s: %+v", event.Type, event.Object)
		}
		writes = append(writes, fmt.Sprintf("%s finalizers=%v allocated=%v reservedFor=%d", event.Type, claim.Finalizers, claim.Status.Allocation != nil, len(claim.Status.ReservedFor)))
		if claim.Status.Allocation != nil {
			break
		}
	}
	protected := fmt.Sprintf("finalizers=[%s]", resourceapi.Finalizer)
	want := []string{
		fmt.Sprintf("%s %s allocated=false reservedFor=0", watch.Added, protected),
		fmt.Sprintf("%s %s allocated=true reservedFor=1", watch.Modified, protected),
	}
	if !slices.Equal(writes, want) {
		t.Errorf("claim writes until allocated:\n got  %q\n want %q", writes, want)
	}
}

func testSevenPods(ctx context.Context, t *testing.T, e *Env) {
	tc := setUp(ctx, t, e, "seven-pods", 3, func(int) []resourcev1.Device { return GPUs(2, nil) })
	e.CreateTemplate(ctx, t, tc.namespace, "gpu", OneDevice("gpu"))
	for i := range 7 {
		tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, fmt.Sprintf("worker-%d", i), "gpu", tc.selector))
	}

	// Six get bound and one is reported unschedulable; which one depends
	// on the order the controller sees them in.
	var pending string
	WaitFor(ctx, t, "6 pods bound and 1 unschedulable", func() (bool, error) {
		pods, err := e.Kube.CoreV1().Pods(tc.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound, unschedulable := 0, 0
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Spec.NodeName != "" {
				bound++
				continue
			}
			if condition := scheduledCondition(pod); condition != nil && condition.Status == corev1.ConditionFalse {
				unschedulable++
				pending = pod.Name
			}
		}
		if bound > 6 {
			t.Fatalf("%d pods bound to 6 GPUs", bound)
		}
		return bound == 6 && unschedulable == 1, nil
	})
	checkNoDoubleAllocations(ctx, t, e, tc.namespace)
	list, err := e.Kube.CoreV1().Pods(tc.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var bound []corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName == "" {
			continue
		}
		bound = append(bound, *pod)
		checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod)
	}

	message := waitUnschedulable(ctx, t, e, tc.namespace, pending, "0/3 nodes fit", "DevicesAllocated", "already allocated")
	t.Logf("PodScheduled=False message: %s", message)
	event := waitWarning(ctx, t, e, tc.namespace, pending, "FailedScheduling")
	t.Logf("Warning event: %s", event)
	if !strings.Contains(event, "request gpu: DevicesAllocated on 3 nodes") {
		t.Errorf("event %q does not give the per-request reason", event)
	}

	// A bound pod goes away: its claim is released and the waiting pod
	// takes the device, without anyone touching it.
	victim := bound[0]
	if err := e.Kube.CoreV1().Pods(tc.namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete pod %s: %v", victim.Name, err)
	}
	pod := waitBound(ctx, t, e, tc.namespace, pending)
	if pod.Spec.NodeName != victim.Spec.NodeName {
		t.Errorf("pending pod bound to %s, but the freed device is on %s", pod.Spec.NodeName, victim.Spec.NodeName)
	}
	checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod)
	checkNoDoubleAllocations(ctx, t, e, tc.namespace)
}

func testCELSelector(ctx context.Context, t *testing.T, e *Env) {
	tc := setUp(ctx, t, e, "cel", 3, func(i int) []resourcev1.Device {
		return GPUs(2, map[string]string{"model": []string{"a100", "h100", "a100"}[i]})
	})
	spec := OneDevice("gpu")
	spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
		Expression: `device.attributes["` + Driver + `"].model == "h100"`,
	}}}
	e.CreateTemplate(ctx, t, tc.namespace, "h100", spec)
	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "inference", "h100", tc.selector))

	pod := waitBound(ctx, t, e, tc.namespace, "inference")
	if pod.Spec.NodeName != tc.nodes[1] {
		t.Errorf("pod bound to %s, only %s has an h100", pod.Spec.NodeName, tc.nodes[1])
	}
	checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod)
}

func testMatchAttribute(ctx context.Context, t *testing.T, e *Env) {
	// Node 0 has its two GPUs on different NUMA nodes, node 1 on the
	// same: only node 1 satisfies the constraint.
	tc := setUp(ctx, t, e, "match-attribute", 2, func(i int) []resourcev1.Device {
		devices := GPUs(2, nil)
		numa := [][]string{{"0", "1"}, {"1", "1"}}[i]
		for d := range devices {
			devices[d].Attributes["numa"] = resourcev1.DeviceAttribute{StringValue: &numa[d]}
		}
		return devices
	})
	attribute := resourcev1.FullyQualifiedName(Driver + "/numa")
	spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{
			Name:    "gpus",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
		}},
		Constraints: []resourcev1.DeviceConstraint{{MatchAttribute: &attribute}},
	}}
	e.CreateTemplate(ctx, t, tc.namespace, "numa-pair", spec)
	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "pair", "numa-pair", tc.selector))

	pod := waitBound(ctx, t, e, tc.namespace, "pair")
	if pod.Spec.NodeName != tc.nodes[1] {
		t.Errorf("pod bound to %s, only %s has two GPUs on one NUMA node", pod.Spec.NodeName, tc.nodes[1])
	}
	if results := checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod); len(results) != 2 {
		t.Errorf("expected 2 devices, got %v", results)
	}

	// A second pair fits nowhere, and the message names the constraint.
	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "second-pair", "numa-pair", tc.selector))
	message := waitUnschedulable(ctx, t, e, tc.namespace, "second-pair", "0/2 nodes fit", "ConstraintUnsatisfiable")
	t.Logf("PodScheduled=False message: %s", message)
}

func testDeviceTaint(ctx context.Context, t *testing.T, e *Env) {
	// One node, gpu-0 tainted NoSchedule, gpu-1 clean.
	tc := setUp(ctx, t, e, "device-taint", 1, func(int) []resourcev1.Device {
		devices := GPUs(2, nil)
		devices[0].Taints = []resourcev1.DeviceTaint{{Key: "maintenance", Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		return devices
	})
	e.CreateTemplate(ctx, t, tc.namespace, "plain", OneDevice("gpu"))
	tolerating := OneDevice("gpu")
	tolerating.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{Key: "maintenance", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	e.CreateTemplate(ctx, t, tc.namespace, "tolerating", tolerating)

	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "first", "plain", tc.selector))
	pod := waitBound(ctx, t, e, tc.namespace, "first")
	if results := checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod); len(results) != 1 || results[0].Device != "gpu-1" {
		t.Errorf("pod without toleration: expected the untainted gpu-1, got %v", results)
	}

	// The tainted device is free, but a pod without toleration may not
	// have it: of the devices it tolerates, none is free.
	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "second", "plain", tc.selector))
	// The message says that only one device is usable.
	message := waitUnschedulable(ctx, t, e, tc.namespace, "second", "0/1 nodes fit", "1 devices match")
	t.Logf("PodScheduled=False message: %s", message)

	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "third", "tolerating", tc.selector))
	pod = waitBound(ctx, t, e, tc.namespace, "third")
	if results := checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod); len(results) != 1 || results[0].Device != "gpu-0" {
		t.Errorf("pod with toleration: expected the tainted gpu-0, got %v", results)
	}
	checkNoDoubleAllocations(ctx, t, e, tc.namespace)
}

// testDeviceTaintRule: a rule taints every device of one node; the pod
// waits, and is placed once the rule goes away.
// testDeviceTaintRule: a rule taints every device of one node; the pod
// waits, and is placed once the rule goes away.
func testDeviceTaintRule(ctx context.Context, t *testing.T, e *Env) {
	tc := setUp(ctx, t, e, "taint-rule", 1, func(int) []resourcev1.Device { return GPUs(2, nil) })
	pool := tc.nodes[0]
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "drain-" + pool},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Pool: &pool},
			Taint:          resourcev1.DeviceTaint{Key: "drain", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	if _, err := e.Resource.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create taint rule: %v", err)
	}
	// A pod placed before the controller sees the rule may get a
	// tainted device, as with kube-scheduler: NoSchedule does not
	// evict. This case is about pods placed after.
	e.WaitTaintRuleSeen(ctx, t, rule.Name)
	e.CreateTemplate(ctx, t, tc.namespace, "gpu", OneDevice("gpu"))
	tc.createPod(ctx, t, e, PodWithTemplate(tc.namespace, "waiting", "gpu", tc.selector))
	// The message blames the taint.
	message := waitUnschedulable(ctx, t, e, tc.namespace, "waiting", "TaintNotTolerated")
	t.Logf("PodScheduled=False message: %s", message)

	if err := e.Resource.ResourceV1().DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete taint rule: %v", err)
	}
	pod := waitBound(ctx, t, e, tc.namespace, "waiting")
	checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod)
}

func testSharedClaim(ctx context.Context, t *testing.T, e *Env) {
	tc := setUp(ctx, t, e, "shared", 3, func(int) []resourcev1.Device { return GPUs(2, nil) })
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-gpu", Namespace: tc.namespace},
		Spec:       OneDevice("gpu"),
	}
	if _, err := e.Resource.ResourceV1().ResourceClaims(tc.namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create claim: %v", err)
	}
	var pods []*corev1.Pod
	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("user-%d", i), Namespace: tc.namespace},
			Spec: corev1.PodSpec{
				NodeSelector:   tc.selector,
				Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}},
			},
		}
		tc.createPod(ctx, t, e, pod)
	}
	for i := range 2 {
		pods = append(pods, waitBound(ctx, t, e, tc.namespace, fmt.Sprintf("user-%d", i)))
	}
	if pods[0].Spec.NodeName != pods[1].Spec.NodeName {
		t.Errorf("pods sharing a claim bound to different nodes: %s and %s", pods[0].Spec.NodeName, pods[1].Spec.NodeName)
	}
	WaitFor(ctx, t, "claim reserved for both pods", func() (bool, error) {
		current, err := e.Resource.ResourceV1().ResourceClaims(tc.namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		return err == nil && len(current.Status.ReservedFor) == 2, err
	})
	current := claimsOf(ctx, t, e, pods[0])[0]
	for _, pod := range pods {
		checkAllocatedFor(t, current, pod)
	}
}

func testPresetNode(ctx context.Context, t *testing.T, e *Env) {
	// One GPU on the pinned node: a second claim generated for the pod
	// (the claim controller once recreated claims its caches hadn't seen
	// yet) would find no device and fail the test.
	tc := setUp(ctx, t, e, "preset-node", 2, func(int) []resourcev1.Device { return GPUs(1, nil) })
	e.CreateTemplate(ctx, t, tc.namespace, "gpu", OneDevice("gpu"))
	pod := PodWithTemplate(tc.namespace, "pinned", "gpu", nil)
	pod.Spec.NodeName = tc.nodes[1]
	pod = tc.createPod(ctx, t, e, pod)
	WaitFor(ctx, t, "claim of the pinned pod allocated and reserved", func() (bool, error) {
		current, err := e.Kube.CoreV1().Pods(tc.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(current.Status.ResourceClaimStatuses) == 0 {
			return false, err
		}
		pod = current
		claim := claimsOf(ctx, t, e, pod)[0]
		return claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 1, nil
	})
	checkAllocatedFor(t, claimsOf(ctx, t, e, pod)[0], pod)
}
