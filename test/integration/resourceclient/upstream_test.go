package resourceclient

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	upstreamv1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/resourceclient"
	"github.com/draplane/draplane/test/integration/framework"
)

// TestUpstreamAPI: our clientset and informers over a server's
// resource.k8s.io/v1 (here our own standalone server, which serves it
// beside resource.draplane.dev) read what client-go's own ResourceV1()
// wrote, and what they write is read back by client-go: lists, watches
// through an informer, status updates and strategic merge patches, and a
// 404 and a 409 as they come.
func TestUpstreamAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	config := framework.StartServer(ctx, t, &wg, false)
	upstream := kubernetes.NewForConfigOrDie(config)
	ours, err := resourceclient.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}

	// Written by client-go, read by ours.
	slice := &upstreamv1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu"},
		Spec: upstreamv1.ResourceSliceSpec{
			Driver: "gpu.example.com", NodeName: ptr.To("node-1"),
			Pool:    upstreamv1.ResourcePool{Name: "node-1", Generation: 3, ResourceSliceCount: 1},
			Devices: []upstreamv1.Device{{Name: "gpu-0", Attributes: map[upstreamv1.QualifiedName]upstreamv1.DeviceAttribute{"model": {StringValue: ptr.To("a100")}}}},
		},
	}
	if _, err := upstream.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slices, err := ours.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
	if err != nil {
		t.Fatalf("list slices with a field selector: %v", err)
	}
	if len(slices.Items) != 1 || slices.Items[0].Spec.Pool.Generation != 3 || *slices.Items[0].Spec.Devices[0].Attributes["model"].StringValue != "a100" {
		t.Errorf("slices read through resource.k8s.io/v1: %+v", slices.Items)
	}

	// An informer of ours sees a claim client-go creates.
	factory := externalversions.NewSharedInformerFactory(ours, 0)
	claims := factory.Resource().V1().ResourceClaims()
	seen := make(chan *resourcev1.ResourceClaim, 10)
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen <- obj.(*resourcev1.ResourceClaim) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	claim := &upstreamv1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "default"},
		Spec: upstreamv1.ResourceClaimSpec{Devices: upstreamv1.DeviceClaim{Requests: []upstreamv1.DeviceRequest{{
			Name: "gpu", Exactly: &upstreamv1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"},
		}}}},
	}
	if _, err := upstream.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var watched *resourcev1.ResourceClaim
	select {
	case watched = <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the informer did not see the claim")
	}
	if watched.Spec.Devices.Requests[0].Exactly == nil || watched.Spec.Devices.Requests[0].Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount {
		t.Errorf("watched claim, defaulted by the server: %+v", watched.Spec.Devices.Requests[0])
	}

	// Written by ours (status update, then a strategic merge patch), read
	// by client-go.
	update := watched.DeepCopy()
	update.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}},
	}
	update.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod", UID: "uid-pod"}}
	if _, err := ours.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, update, metav1.UpdateOptions{FieldManager: "test"}); err != nil {
		t.Fatalf("status update through resource.k8s.io/v1: %v", err)
	}
	if _, err := ours.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, update, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("second update on the old resourceVersion: %v, want a conflict", err)
	}
	if _, err := ours.ResourceV1().ResourceClaims("default").Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing claim: %v, want 404", err)
	}
	patch := []byte(`{"status":{"reservedFor":[{"resource":"pods","name":"other","uid":"uid-other"}]}}`)
	if _, err := ours.ResourceV1().ResourceClaims("default").Patch(ctx, "claim", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("strategic merge patch: %v", err)
	}
	got, err := upstream.ResourceV1().ResourceClaims("default").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Allocation == nil || got.Status.Allocation.Devices.Results[0].Device != "gpu-0" || len(got.Status.ReservedFor) != 2 {
		t.Errorf("claim read by client-go: allocation %+v, reservedFor %+v", got.Status.Allocation, got.Status.ReservedFor)
	}
	if got.APIVersion != "" && got.APIVersion != "resource.k8s.io/v1" {
		t.Errorf("apiVersion %q", got.APIVersion)
	}
}
