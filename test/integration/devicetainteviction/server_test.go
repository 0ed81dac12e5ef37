package devicetainteviction

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/controllers/devicetainteviction"
	"github.com/draplane/draplane/internal/testing/testenv"
)

// TestServerControllers uses the controllers as the server runs them
// (behind leader election, with its defaults): they allocate a shared
// claim for three pods and bind them; a NoExecute rule on the device
// then evicts all three, and the rule's status counts them.
func TestServerControllers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	e := startServer(ctx, t, &wg, true)

	const (
		ns     = "wired"
		node   = "wired-node"
		driver = "wired.example.com"
		class  = "wired-gpu"
	)
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	n, err := e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
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
			Devices:  []resourcev1.Device{{Name: "gpu-0"}},
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
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
		}}}},
	}
	if _, err := e.resource.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create claim: %v", err)
	}
	var pods []*corev1.Pod
	for _, name := range []string{"worker-0", "worker-1", "worker-2"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared")}},
			},
		}
		pod, err := e.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		pods = append(pods, pod)
	}
	testenv.WaitFor(ctx, t, pollTimeout, "shared claim allocated and reserved for three bound pods", func() (bool, error) {
		claim, err := e.resource.ResourceV1().ResourceClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil || claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != len(pods) {
			return false, err
		}
		for _, pod := range pods {
			current, err := e.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil || current.Spec.NodeName == "" {
				return false, err
			}
		}
		return true, nil
	})

	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "wired-gpu-0"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To(node), Device: ptr.To("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoExecute},
		},
	}
	if _, err := e.resource.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rule: %v", err)
	}
	for _, pod := range pods {
		condition := waitEvicted(ctx, t, e, pod)
		if condition != nil && condition.Reason != devicetainteviction.PodConditionReason {
			t.Errorf("pod %s: DisruptionTarget %+v, want reason %s", pod.Name, condition, devicetainteviction.PodConditionReason)
		}
	}
	waitRuleCondition(ctx, t, e, rule.Name, devicetainteviction.ReasonCompleted, "0 pods pending eviction, 3 pods evicted, 0 evictions cancelled")
}
