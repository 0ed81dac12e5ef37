package allocation

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// TestRun goes through informers, handlers, the queue and the workers: a
// pod that does not fit is parked with PodScheduled=False and placed once
// a ResourceSlice with a device appears.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	pod := makePod("pod-1", withGeneratedClaim("gpu"))
	kubeClient := kubefake.NewClientset(pod, makeNode("node-a"))
	resourceClient := resourcefake.NewSimpleClientset(makeClass(), generatedClaim(pod, "gpu"))
	serverLike(kubeClient, resourceClient, nil)

	kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	c, err := NewController(klog.FromContext(ctx), kubeClient, resourceClient,
		kubeInformers.Core().V1().Pods(), kubeInformers.Core().V1().Nodes(),
		resourceInformers.Resource().V1().ResourceClaims(), resourceInformers.Resource().V1().DeviceClasses(),
		resourceInformers.Resource().V1().ResourceSlices(), resourceInformers.Resource().V1().DeviceTaintRules(),
		Options{MinRetryDelay: time.Millisecond, MaxRetryDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	kubeInformers.Start(ctx.Done())
	resourceInformers.Start(ctx.Done())
	wg.Go(func() { c.Run(ctx, 2) })

	getPod := func() *corev1.Pod {
		current, err := kubeClient.CoreV1().Pods(testNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod: %v", err)
		}
		return current
	}
	poll(ctx, t, "pod reported unschedulable", func() bool {
		for _, condition := range getPod().Status.Conditions {
			if condition.Type == corev1.PodScheduled && condition.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	})
	if node := getPod().Spec.NodeName; node != "" {
		t.Fatalf("pod bound to %s without devices", node)
	}

	if _, err := resourceClient.ResourceV1().ResourceSlices().Create(ctx, makeSlice("node-a", 1, "a100"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create slice: %v", err)
	}
	poll(ctx, t, "pod bound", func() bool { return getPod().Spec.NodeName == "node-a" })
	claim, err := resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(ctx, "pod-1-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get claim: %v", err)
	}
	if got := describeAllocation(claim); got != "node-a/gpu-0" {
		t.Errorf("expected allocation node-a/gpu-0, got %q", got)
	}
}

func poll(ctx context.Context, t *testing.T, what string, condition func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return condition(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
