package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestControllersPlaceAPod: with the controllers running (the default),
// the quickstart's pod gets a claim generated from its template, the claim
// is allocated on the node that has the devices and reserved for the pod,
// and the pod is bound there. Deleting the pod releases and deletes the
// claim. Leader election is on, so this also shows the lease being taken.
func TestControllersPlaceAPod(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	s.MustKubectl(t, `apiVersion: v1
kind: Node
metadata:
  name: node-1
`, "apply", "-f", "-")
	s.MustKubectl(t, "", "patch", "node", "node-1", "--subresource=status", "--type=merge",
		"-p", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Test","message":"test node"}]}}`)
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples"))

	var claimName string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "gpu-job", metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName == "" || len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, nil
		}
		claimName = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod not bound with its claim recorded: %v\n%s", err, s.MustKubectl(t, "", "get", "pods,resourceclaims", "-A", "-o", "wide"))
	}
	if !strings.HasPrefix(claimName, "gpu-job-gpu-") {
		t.Errorf("generated claim name %q lacks the <pod>-<podclaim>- prefix", claimName)
	}
	claim, err := s.Client(t).ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim not allocated one device: %+v", claim.Status)
	}
	if got := claim.Status.Allocation.Devices.Results[0].Pool; got != "node-1" {
		t.Errorf("allocated from pool %q, want node-1", got)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].Name != "gpu-job" {
		t.Errorf("claim not reserved for the pod: %+v", claim.Status.ReservedFor)
	}
	// Its writers keep their managedFields entries: the claims store
	// writes its updates from the shared informer's copy of the claim,
	// which must hold them.
	// (The creator, the resource claim controller, is named by its
	// client's user agent.)
	for _, want := range []struct{ manager, subresource string }{
		{"", ""},
		{"draplane-allocation-controller", "status"},
	} {
		if !slices.ContainsFunc(claim.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
			return (want.manager == "" || e.Manager == want.manager) && e.Subresource == want.subresource && e.FieldsV1 != nil
		}) {
			t.Errorf("claim has no managedFields entry of %q (subresource %q): %+v", want.manager, want.subresource, claim.ManagedFields)
		}
	}
	if out := s.MustKubectl(t, "", "get", "leases", "-n", "kube-system", "draplane-controllers", "-o", "jsonpath={.spec.holderIdentity}"); out == "" {
		t.Errorf("no holder of the controller lease")
	}

	s.MustKubectl(t, "", "delete", "pod", "gpu-job", "--grace-period=1")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.Client(t).ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("generated claim not deleted after its pod: %v\n%s", err, s.MustKubectl(t, "", "get", "pods,resourceclaims", "-A", "-o", "wide"))
	}
}

// TestStopHandsBackTheLeases: a server stopped with SIGTERM releases its
// leader leases before it stops serving, so the next start leads at once
// instead of waiting out the old lease (15 s). The check reads the Lease
// after a restart without controllers: nobody may hold it.
func TestStopHandsBackTheLeases(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, "draplane-controllers", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", nil
	}); err != nil {
		t.Fatalf("no controller lease holder: %v", err)
	}
	s.Stop()
	if released := holderAfterStop(t, s); released != "" {
		t.Fatalf("lease still held by %q after a graceful stop", released)
	}
}

// holderAfterStop restarts the server with its controllers off and reads
// the lease as the stopped server left it.
func holderAfterStop(t *testing.T, s *testServer) string {
	t.Helper()
	s.args = append(s.args, "--controllers=false")
	s.Restart(t)
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "draplane-controllers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
