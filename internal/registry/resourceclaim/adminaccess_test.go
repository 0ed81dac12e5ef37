package resourceclaim

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/testing/apitest"
)

// namespaces is a NamespaceGetter over a fixed set; it counts reads.
type namespaces struct {
	labels map[string]map[string]string
	err    error
	reads  int
}

func (n *namespaces) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	n.reads++
	if n.err != nil {
		return nil, n.err
	}
	labels, ok := n.labels[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, nil
}

func adminRequest(c *resourceapi.ResourceClaim) {
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{
		Name:    "admin",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, AdminAccess: ptr.To(true)},
	})
}

func inNamespace(namespace string) func(*resourceapi.ResourceClaim) {
	return func(c *resourceapi.ResourceClaim) { c.Namespace = namespace }
}

func adminResult(c *resourceapi.ResourceClaim) {
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "pool", Device: "gpu-0"},
		{Request: "admin", Driver: "gpu.example.com", Pool: "pool", Device: "gpu-1", AdminAccess: ptr.To(true)},
	}}}
}

func TestAdminAccess(t *testing.T) {
	cluster := map[string]map[string]string{
		"labelled":   {resourceapi.AdminAccessNamespaceLabel: "true"},
		"unlabelled": nil,
		"false":      {resourceapi.AdminAccessNamespaceLabel: "false"},
	}
	type check string
	const (
		create check = "create"
		update check = "update"
		status check = "status"
	)
	tests := map[string]struct {
		check    check
		claim    *resourceapi.ResourceClaim
		old      *resourceapi.ResourceClaim
		noGetter bool
		getErr   error
		// wantField is the field of the error; "" means allowed.
		wantField string
		// wantReads is how often namespaces are read.
		wantReads int
	}{
		"no admin access: no read": {
			check: create, claim: testClaim(inNamespace("unlabelled")),
		},
		"labelled namespace": {
			check: create, claim: testClaim(adminRequest, inNamespace("labelled")), wantReads: 1,
		},
		"unlabelled namespace": {
			check: create, claim: testClaim(adminRequest, inNamespace("unlabelled")), wantReads: 1,
			wantField: "spec.devices.requests[1].exactly.adminAccess",
		},
		"label not true": {
			check: create, claim: testClaim(adminRequest, inNamespace("false")), wantReads: 1,
			wantField: "spec.devices.requests[1].exactly.adminAccess",
		},
		"namespace missing": {
			check: create, claim: testClaim(adminRequest, inNamespace("gone")), wantReads: 1,
			wantField: "spec.devices.requests[1].exactly.adminAccess",
		},
		"namespaces cannot be read": {
			check: create, claim: testClaim(adminRequest, inNamespace("labelled")), getErr: errors.New("connection refused"), wantReads: 1,
			wantField: "spec.devices.requests[1].exactly.adminAccess",
		},
		"no namespaces at all": {
			check: create, claim: testClaim(adminRequest, inNamespace("labelled")), noGetter: true,
			wantField: "spec.devices.requests[1].exactly.adminAccess",
		},
		"update that newly asks": {
			check: update, claim: testClaim(adminRequest, inNamespace("unlabelled")), old: testClaim(inNamespace("unlabelled")), wantReads: 1,
			wantField: "spec.devices.requests[1].exactly.adminAccess",
		},
		"update of a claim that asked before: label removed meanwhile": {
			check: update, claim: testClaim(adminRequest, inNamespace("unlabelled")), old: testClaim(adminRequest, inNamespace("unlabelled")),
		},
		"status newly granting admin access, unlabelled": {
			check: status, claim: testClaim(adminRequest, adminResult, inNamespace("unlabelled")), old: testClaim(adminRequest, inNamespace("unlabelled")), wantReads: 1,
			wantField: "status.allocation.devices.results[1].adminAccess",
		},
		"status newly granting admin access, labelled": {
			check: status, claim: testClaim(adminRequest, adminResult, inNamespace("labelled")), old: testClaim(adminRequest, inNamespace("labelled")), wantReads: 1,
		},
		"status keeping a granted allocation": {
			check: status, claim: testClaim(adminRequest, adminResult, reserved, inNamespace("unlabelled")), old: testClaim(adminRequest, adminResult, inNamespace("unlabelled")),
		},
		"status without admin access": {
			check: status, claim: testClaim(allocated("gpu-0"), inNamespace("unlabelled")), old: testClaim(inNamespace("unlabelled")),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			getter := &namespaces{labels: cluster, err: tc.getErr}
			a := AdminAccess{Namespaces: getter}
			if tc.noGetter {
				a = AdminAccess{}
			}
			ctx := context.Background()
			var errs []string
			strategy := NewStrategy(apitest.Scheme(), a)
			switch tc.check {
			case create:
				for _, err := range strategy.Validate(ctx, tc.claim) {
					errs = append(errs, err.Field+": "+err.Error())
				}
			case update:
				for _, err := range a.ValidateSpecUpdate(ctx, tc.claim.Namespace, &tc.claim.Spec, &tc.old.Spec, field.NewPath("spec")) {
					errs = append(errs, err.Field+": "+err.Error())
				}
			case status:
				for _, err := range NewStatusStrategy(apitest.Scheme(), a).ValidateUpdate(ctx, tc.claim, tc.old) {
					errs = append(errs, err.Field+": "+err.Error())
				}
			}
			switch {
			case tc.wantField == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", errs)
			case tc.wantField != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.wantField) || !strings.Contains(errs[0], resourceapi.AdminAccessNamespaceLabel)):
				t.Errorf("want one error for %s naming the label, got %v", tc.wantField, errs)
			}
			if getter.reads != tc.wantReads {
				t.Errorf("namespaces read %d times, want %d", getter.reads, tc.wantReads)
			}
		})
	}
}
