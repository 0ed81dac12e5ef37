package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestDeviceStatusOfAnUnallocatedDevice: a driver that reports the status
// of a device the claim does not hold is told so (422 naming
// status.devices[i]), through the clientset and through kubectl, and
// nothing of the write is stored. The status of an allocated device is
// stored.
func TestDeviceStatusOfAnUnallocatedDevice(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	claim, err := claims.Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "device-status"},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claims.Delete(ctx, claim.Name, metav1.DeleteOptions{}) })
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}},
	}}
	claim, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// gpu-1 is in the same pool but not in the allocation.
	wrong := claim.DeepCopy()
	wrong.Status.Devices = []resourcev1.AllocatedDeviceStatus{
		{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"},
		{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"},
	}
	_, err = claims.UpdateStatus(ctx, wrong, metav1.UpdateOptions{})
	expectInvalid(t, err, "status.devices[1]")
	if err != nil && !strings.Contains(err.Error(), "must be an allocated device in the claim") {
		t.Errorf("error does not say why: %v", err)
	}

	out, err := s.Kubectl(t, "", "patch", "resourceclaim", "device-status", "-n", "default", "--subresource=status", "--type=merge",
		"-p", `{"status":{"devices":[{"driver":"gpu.example.com","pool":"node-1","device":"gpu-7"}]}}`)
	if err == nil || !strings.Contains(out, "status.devices[0]") || !strings.Contains(out, "must be an allocated device in the claim") {
		t.Errorf("kubectl patch with the status of an unallocated device: %v\n%s", err, out)
	}

	got, err := claims.Get(ctx, "device-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Devices) != 0 {
		t.Errorf("refused device status was stored: %+v", got.Status.Devices)
	}
	if got.ResourceVersion != claim.ResourceVersion {
		t.Errorf("refused writes changed the claim: resourceVersion %s, was %s", got.ResourceVersion, claim.ResourceVersion)
	}

	// The status of the allocated device is recorded.
	right := got.DeepCopy()
	right.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}}
	stored, err := claims.UpdateStatus(ctx, right, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status of the allocated device: %v", err)
	}
	if len(stored.Status.Devices) != 1 || stored.Status.Devices[0].Device != "gpu-0" {
		t.Errorf("status of the allocated device not stored: %+v", stored.Status.Devices)
	}
}
