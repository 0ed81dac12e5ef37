package resourceclaim

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/testing/apitest"
)

func testClaim(mutate ...func(*resourceapi.ResourceClaim)) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "default", ResourceVersion: "1", Generation: 1},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name:    "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	for _, m := range mutate {
		m(claim)
	}
	return claim
}

func allocated(devices ...string) func(*resourceapi.ResourceClaim) {
	return func(c *resourceapi.ResourceClaim) {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, device := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.example.com", Pool: "pool", Device: device})
		}
	}
}

func withDeviceStatus(devices ...string) func(*resourceapi.ResourceClaim) {
	return func(c *resourceapi.ResourceClaim) {
		for _, device := range devices {
			c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: "gpu.example.com", Pool: "pool", Device: device})
		}
	}
}

func reserved(c *resourceapi.ResourceClaim) {
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod", UID: types.UID("uid-1")}}
}

func TestPrepareForCreateClearsStatus(t *testing.T) {
	claim := testClaim(allocated("gpu-0"), reserved, func(c *resourceapi.ResourceClaim) { c.Generation = 5 })
	NewStrategy(apitest.Scheme(), AdminAccess{}).PrepareForCreate(context.Background(), claim)
	if diff := cmp.Diff(resourceapi.ResourceClaimStatus{}, claim.Status); diff != "" {
		t.Errorf("status after create (-want +got):\n%s", diff)
	}
	if claim.Generation != 1 {
		t.Errorf("generation %d, want 1", claim.Generation)
	}
}

func TestUpdate(t *testing.T) {
	tests := map[string]struct {
		old, new   *resourceapi.ResourceClaim
		wantStatus resourceapi.ResourceClaimStatus
		wantErrs   []string
	}{
		"labels may change": {
			old: testClaim(),
			new: testClaim(func(c *resourceapi.ResourceClaim) { c.Labels = map[string]string{"a": "b"} }),
		},
		"status change is dropped": {
			old:        testClaim(allocated("gpu-0")),
			new:        testClaim(),
			wantStatus: testClaim(allocated("gpu-0")).Status,
		},
		"spec is immutable": {
			old: testClaim(),
			new: testClaim(func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
			}),
			wantErrs: []string{"spec"},
		},
	}
	strategy := NewStrategy(apitest.Scheme(), AdminAccess{})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			strategy.PrepareForUpdate(ctx, tc.new, tc.old)
			if diff := cmp.Diff(tc.wantStatus, tc.new.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			var gotErrs []string
			for _, err := range strategy.ValidateUpdate(ctx, tc.new, tc.old) {
				gotErrs = append(gotErrs, err.Field)
			}
			if diff := cmp.Diff(tc.wantErrs, gotErrs); diff != "" {
				t.Errorf("error fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusUpdate(t *testing.T) {
	tests := map[string]struct {
		old, new   *resourceapi.ResourceClaim
		wantSpec   resourceapi.ResourceClaimSpec
		wantLabels map[string]string
		wantStatus resourceapi.ResourceClaimStatus
		// wantErrs are the fields validation refuses.
		wantErrs []string
	}{
		"allocation is written, spec and labels are not": {
			old: testClaim(),
			new: testClaim(allocated("gpu-0"), func(c *resourceapi.ResourceClaim) {
				c.Labels = map[string]string{"sneaky": "yes"}
				c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
			}),
			wantSpec:   testClaim().Spec,
			wantStatus: testClaim(allocated("gpu-0")).Status,
		},
		"device status of an allocated device is kept": {
			old:        testClaim(allocated("gpu-0")),
			new:        testClaim(allocated("gpu-0"), withDeviceStatus("gpu-0")),
			wantSpec:   testClaim().Spec,
			wantStatus: testClaim(allocated("gpu-0"), withDeviceStatus("gpu-0")).Status,
		},
		"device status of a device not allocated is refused, not dropped": {
			old:        testClaim(allocated("gpu-0")),
			new:        testClaim(allocated("gpu-0"), withDeviceStatus("gpu-0", "gpu-9")),
			wantSpec:   testClaim().Spec,
			wantStatus: testClaim(allocated("gpu-0"), withDeviceStatus("gpu-0", "gpu-9")).Status,
			wantErrs:   []string{"status.devices[1]"},
		},
		"device status of an unallocated claim is refused": {
			old:        testClaim(),
			new:        testClaim(withDeviceStatus("gpu-0")),
			wantSpec:   testClaim().Spec,
			wantStatus: testClaim(withDeviceStatus("gpu-0")).Status,
			wantErrs:   []string{"status.devices[0]"},
		},
		"deallocation drops the status of the devices it held": {
			old:      testClaim(allocated("gpu-0"), withDeviceStatus("gpu-0")),
			new:      testClaim(withDeviceStatus("gpu-0")),
			wantSpec: testClaim().Spec,
		},
		"deallocation does not hide status of a device never held": {
			old:        testClaim(allocated("gpu-0"), withDeviceStatus("gpu-0")),
			new:        testClaim(withDeviceStatus("gpu-0", "gpu-9")),
			wantSpec:   testClaim().Spec,
			wantStatus: testClaim(withDeviceStatus("gpu-9")).Status,
			wantErrs:   []string{"status.devices[0]"},
		},
	}
	strategy := NewStatusStrategy(apitest.Scheme(), AdminAccess{})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			strategy.PrepareForUpdate(context.Background(), tc.new, tc.old)
			if diff := cmp.Diff(tc.wantSpec, tc.new.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLabels, tc.new.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStatus, tc.new.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			var gotErrs []string
			for _, err := range strategy.ValidateUpdate(context.Background(), tc.new, tc.old) {
				gotErrs = append(gotErrs, err.Field)
			}
			if diff := cmp.Diff(tc.wantErrs, gotErrs); diff != "" {
				t.Errorf("error fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimStateAndClasses(t *testing.T) {
	tests := map[string]struct {
		claim       *resourceapi.ResourceClaim
		wantState   string
		wantClasses []string
	}{
		"pending":   {claim: testClaim(), wantState: "pending", wantClasses: []string{"gpu.example.com"}},
		"allocated": {claim: testClaim(allocated("gpu-0")), wantState: "allocated", wantClasses: []string{"gpu.example.com"}},
		"reserved":  {claim: testClaim(allocated("gpu-0"), reserved), wantState: "allocated,reserved", wantClasses: []string{"gpu.example.com"}},
		"deleted": {
			claim:       testClaim(func(c *resourceapi.ResourceClaim) { c.DeletionTimestamp = ptr.To(metav1.Now()) }),
			wantState:   "pending,deleted",
			wantClasses: []string{"gpu.example.com"},
		},
		"first available": {
			claim: testClaim(func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "nic", FirstAvailable: []resourceapi.DeviceSubRequest{
					{Name: "fast", DeviceClassName: "nic.example.com"}, {Name: "slow", DeviceClassName: "gpu.example.com"},
				}})
			}),
			wantState:   "pending",
			wantClasses: []string{"gpu.example.com", "nic.example.com"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ClaimState(tc.claim); got != tc.wantState {
				t.Errorf("state %q, want %q", got, tc.wantState)
			}
			if diff := cmp.Diff(tc.wantClasses, ClassNames(tc.claim.Spec)); diff != "" {
				t.Errorf("classes (-want +got):\n%s", diff)
			}
		})
	}
}
