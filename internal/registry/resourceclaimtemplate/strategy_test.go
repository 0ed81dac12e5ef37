package resourceclaimtemplate

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/registry/resourceclaim"
	"github.com/draplane/draplane/internal/testing/apitest"
)

func testTemplate(mutate ...func(*resourceapi.ResourceClaimTemplate)) *resourceapi.ResourceClaimTemplate {
	template := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "template", Namespace: "default", ResourceVersion: "1"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			}}},
		}}},
	}
	for _, m := range mutate {
		m(template)
	}
	return template
}

func withAdminAccess(tt *resourceapi.ResourceClaimTemplate) {
	tt.Spec.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
}

// TestValidateAdminAccess: a template with admin access is refused in a
// namespace without the label (no namespaces to read here), as a claim.
func TestValidateAdminAccess(t *testing.T) {
	strategy := NewStrategy(apitest.Scheme(), resourceclaim.AdminAccess{})
	if errs := strategy.Validate(context.Background(), testTemplate()); len(errs) > 0 {
		t.Errorf("template without admin access: %v", errs)
	}
	errs := strategy.Validate(context.Background(), testTemplate(withAdminAccess))
	if len(errs) != 1 || errs[0].Field != "spec.spec.devices.requests[0].exactly.adminAccess" {
		t.Errorf("template with admin access: want one error for its adminAccess field, got %v", errs)
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := map[string]struct {
		new      *resourceapi.ResourceClaimTemplate
		wantErrs []string
	}{
		"labels may change": {
			new: testTemplate(func(tt *resourceapi.ResourceClaimTemplate) { tt.Labels = map[string]string{"a": "b"} }),
		},
		"spec is immutable": {
			new:      testTemplate(func(tt *resourceapi.ResourceClaimTemplate) { tt.Spec.Spec.Devices.Requests[0].Name = "other" }),
			wantErrs: []string{"spec"},
		},
		"claim metadata in the template is immutable too": {
			new: testTemplate(func(tt *resourceapi.ResourceClaimTemplate) {
				tt.Spec.ObjectMeta.Labels = map[string]string{"a": "b"}
			}),
			wantErrs: []string{"spec"},
		},
		"asking for admin access anew needs the namespace label": {
			new:      testTemplate(withAdminAccess),
			wantErrs: []string{"spec", "spec.spec.devices.requests[0].exactly.adminAccess"},
		},
	}
	strategy := NewStrategy(apitest.Scheme(), resourceclaim.AdminAccess{})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := testTemplate()
			strategy.PrepareForUpdate(context.Background(), tc.new, old)
			var got []string
			for _, err := range strategy.ValidateUpdate(context.Background(), tc.new, old) {
				got = append(got, err.Field)
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("error fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTable(t *testing.T) {
	template := testTemplate(func(tt *resourceapi.ResourceClaimTemplate) {
		tt.Spec.Spec.Devices.Requests = append(tt.Spec.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name: "nic", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: "nic.example.com"}},
		})
	})
	table, err := tableConvertor.ConvertToTable(context.Background(), template, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"template", "gpu.example.com,nic.example.com", int64(2), "<unknown>"}
	if diff := cmp.Diff(want, table.Rows[0].Cells); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
