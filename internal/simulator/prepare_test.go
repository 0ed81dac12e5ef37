package simulator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver/drivertesting"
)

// TestPrepare: all claims of a pod are prepared in one call before it
// runs; one failed claim keeps the pod Pending with an event naming the
// claim and the driver's error; the claims are unprepared once the pod is
// done.
func TestPrepare(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec: corev1.PodSpec{NodeName: "sim-node-0", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "a", ResourceClaimName: ptr.To("claim-a")},
				{Name: "b", ResourceClaimName: ptr.To("claim-b")},
				{Name: "other", ResourceClaimName: ptr.To("claim-other")},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	claim := func(name, driverName string) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
			Status: resourcev1.ResourceClaimStatus{
				Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: driverName, Pool: "sim-node-0", Device: "gpu-0"}}}},
				ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}},
			},
		}
	}
	tests := []struct {
		name       string
		fail       map[string]string
		wantPhase  corev1.PodPhase
		wantEvents []string
	}{
		{name: "every claim prepared: Running", wantPhase: corev1.PodRunning},
		{name: "one claim fails: Pending with an event naming it", fail: map[string]string{"claim-b": "device gpu-0 is on fire"},
			wantPhase:  corev1.PodPending,
			wantEvents: []string{"Warning FailedPrepareDynamicResources Failed to prepare claim claim-b with driver gpu.sim.draplane.dev: device gpu-0 is on fire"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			preparer := &drivertesting.RecordingPreparer{Fail: tc.fail}
			h := newSimulator(t, Options{Nodes: 1, DevicesPerNode: 1, Driver: driver, Preparer: preparer}, []runtime.Object{pod}, nil)
			recorder := record.NewFakeRecorder(10)
			h.sim.agent.SetRecorder(recorder)
			if err := h.pods.Add(pod); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*resourcev1.ResourceClaim{claim("claim-a", driver), claim("claim-b", driver), claim("claim-other", "other.example.com")} {
				if err := h.claims.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			_, err := h.sim.agent.SyncPod(h.ctx, "ns/p")
			if (err != nil) != (tc.wantPhase == corev1.PodPending) {
				t.Errorf("sync error %v", err)
			}
			if len(preparer.PrepareCalls()) != 1 || strings.Join(preparer.PrepareCalls()[0], ",") != "claim-a,claim-b" {
				t.Errorf("prepare calls %v, want one with the driver's two claims", preparer.PrepareCalls())
			}
			got, err := h.kube.CoreV1().Pods("ns").Get(h.ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tc.wantPhase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tc.wantPhase)
			}
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
			}
			if strings.Join(events, "|") != strings.Join(tc.wantEvents, "|") {
				t.Errorf("events %q, want %q", events, tc.wantEvents)
			}
			if tc.wantPhase != corev1.PodRunning {
				return
			}
			// The pod is deleted: its claims are unprepared once.
			if err := h.pods.Delete(pod); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := h.sim.agent.SyncPod(h.ctx, "ns/p"); err != nil {
					t.Fatal(err)
				}
			}
			if len(preparer.UnprepareCalls()) != 1 || strings.Join(preparer.UnprepareCalls()[0], ",") != "claim-a,claim-b" {
				t.Errorf("unprepare calls %v, want one with the two prepared claims", preparer.UnprepareCalls())
			}
		})
	}
}

// TestSeedOwnsSlices: the simulated slices are published through the
// driver library, owned by their Node, and a second seed writes nothing.
func TestSeedOwnsSlices(t *testing.T) {
	h := newSimulator(t, Options{Nodes: 2, DevicesPerNode: 200, Driver: driver}, nil, nil)
	if err := h.sim.Seed(h.ctx); err != nil {
		t.Fatal(err)
	}
	list, err := h.resource.ResourceV1().ResourceSlices().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 4 {
		t.Errorf("%d slices for 2 nodes of 200 devices, want 4 (128 devices at most per slice)", len(list.Items))
	}
	for _, s := range list.Items {
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].Name != *s.Spec.NodeName {
			t.Errorf("slice %s owner references %v", s.Name, s.OwnerReferences)
		}
		if s.Spec.Pool.ResourceSliceCount != 2 {
			t.Errorf("slice %s resourceSliceCount %d, want 2", s.Name, s.Spec.Pool.ResourceSliceCount)
		}
	}
}
