package resourceclaim

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/testing/testenv"
)

// TestRun drives the whole controller through informers on fake clients:
// a pod gets its claim, and once it has finished the claim goes away.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	kubeClient := kubefake.NewClientset()
	resourceClient := resourcefake.NewSimpleClientset(makeTemplate("gpu-template"))
	serverLikeClaims(resourceClient)
	kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	c, err := NewController(klog.FromContext(ctx), kubeClient, resourceClient,
		kubeInformers.Core().V1().Pods(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	kubeInformers.Start(ctx.Done())
	resourceInformers.Start(ctx.Done())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { c.Run(ctx, 2) })

	pod := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withTemplateClaim("nic", "gpu-template"))
	pod, err = kubeClient.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	// Both claims are generated and recorded.
	var statuses []corev1.PodResourceClaimStatus
	testenv.WaitFor(ctx, t, time.Minute, "claims recorded in pod status", func() (bool, error) {
		pod, err := kubeClient.CoreV1().Pods(testNamespace).Get(ctx, "pod-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		statuses = pod.Status.ResourceClaimStatuses
		return len(statuses) == 2, nil
	})
	for _, status := range statuses {
		claim, err := resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(ctx, *status.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get claim of pod claim %s: %v", status.Name, err)
		}
		if claim.GenerateName != "pod-a-"+status.Name+"-" {
			t.Errorf("claim %s: generateName %q", claim.Name, claim.GenerateName)
		}
	}
	claims, err := resourceClient.ResourceV1().ResourceClaims(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	if len(claims.Items) != 2 {
		t.Errorf("expected 2 claims, got %d", len(claims.Items))
	}

	// The pod finishes: its claims are deleted.
	pod.Status.Phase = corev1.PodSucceeded
	if _, err := kubeClient.CoreV1().Pods(testNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update pod status: %v", err)
	}
	testenv.WaitFor(ctx, t, time.Minute, "generated claims deleted", func() (bool, error) {
		claims, err := resourceClient.ResourceV1().ResourceClaims(testNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(claims.Items) == 0, nil
	})
}
