package devicetainteviction

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/controllers/devicetainteviction"
	"github.com/draplane/draplane/internal/testing/testenv"
)

// testNoSchedule: with the allocation controller running, a pod gets one
// of two devices. A NoSchedule rule on that device leaves the pod alone
// (the rule's status counts it); a second NoSchedule rule on the other,
// free device keeps a new pod from being allocated until that rule goes.
func testNoSchedule(ctx context.Context, t *testing.T, e *env) {
	const (
		ns     = "noschedule"
		node   = "noschedule-node"
		driver = "noschedule.example.com"
		class  = "noschedule-gpu"
	)
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	n, err := e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"test": ns}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("report node ready: %v", err)
	}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	if _, err := e.resource.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create slice: %v", err)
	}
	deviceClass := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`},
		}}},
	}
	if _, err := e.resource.ResourceV1().DeviceClasses().Create(ctx, deviceClass, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create class: %v", err)
	}
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
		}}}}},
	}
	if _, err := e.resource.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create template: %v", err)
	}
	createPod := func(name string) *corev1.Pod {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector:   map[string]string{"test": ns},
				Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}},
			},
		}
		pod, err := e.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		return pod
	}
	// allocatedDevice waits for the pod to be bound and returns the
	// device of its claim.
	allocatedDevice := func(pod *corev1.Pod) string {
		t.Helper()
		var device string
		testenv.WaitFor(ctx, t, pollTimeout, "pod "+pod.Name+" bound with an allocated claim", func() (bool, error) {
			current, err := e.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil || current.Spec.NodeName == "" || len(current.Status.ResourceClaimStatuses) == 0 || current.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				return false, err
			}
			claim, err := e.resource.ResourceV1().ResourceClaims(ns).Get(ctx, *current.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
			if err != nil || claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) == 0 {
				return false, err
			}
			device = claim.Status.Allocation.Devices.Results[0].Device
			return true, nil
		})
		return device
	}
	noSchedule := func(name, device string) {
		t.Helper()
		rule := &resourcev1.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.DeviceTaintRuleSpec{
				DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To(node), Device: ptr.To(device)},
				Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
			},
		}
		if _, err := e.resource.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create rule %s: %v", name, err)
		}
		testenv.WaitFor(ctx, t, pollTimeout, "the allocation controller's cache to show rule "+name, func() (bool, error) {
			_, err := e.allocationTaintRules.Get(name)
			return err == nil, nil
		})
	}

	first := createPod("first")
	used := allocatedDevice(first)
	free := "gpu-0"
	if used == free {
		free = "gpu-1"
	}

	noSchedule("noschedule-used", used)
	waitRuleCondition(ctx, t, e, "noschedule-used", devicetainteviction.ReasonNotStarted,
		"Eviction not started because the effect is NoSchedule: 1 pods use selected devices without tolerating the taint")
	current, err := e.kube.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod on a NoSchedule device: %v", err)
	}
	if current.DeletionTimestamp != nil || disruptionTarget(current) != nil {
		t.Errorf("NoSchedule touched the running pod: deletionTimestamp=%v conditions=%+v", current.DeletionTimestamp, current.Status.Conditions)
	}

	noSchedule("noschedule-free", free)
	second := createPod("second")
	testenv.WaitFor(ctx, t, pollTimeout, "pod second unschedulable", func() (bool, error) {
		pod, err := e.kube.CoreV1().Pods(ns).Get(ctx, second.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, condition := range pod.Status.Conditions {
			if condition.Type == corev1.PodScheduled && condition.Status == corev1.ConditionFalse {
				t.Logf("second pod: PodScheduled=False %s: %s", condition.Reason, condition.Message)
				return pod.Spec.NodeName == "", nil
			}
		}
		return false, nil
	})
	if err := e.resource.ResourceV1().DeviceTaintRules().Delete(ctx, "noschedule-free", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete rule: %v", err)
	}
	if got := allocatedDevice(second); got != free {
		t.Errorf("second pod got %s, want the device freed of its taint, %s", got, free)
	}
}
