package resourceclaimtemplate

import (
	"context"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/registry/resourceclaim"
	"github.com/draplane/draplane/internal/testing/apitest"
)

func withDerivedAttributes(tt *resourceapi.ResourceClaimTemplate) {
	tt.Spec.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{{Name: "derived/numa", Expression: "1"}}
}

// TestDropDisabledFields: a template's derivedAttributes follow the
// gate like a claim's: dropped with the gate off unless the stored
// template uses them.
func TestDropDisabledFields(t *testing.T) {
	strategy := NewStrategy(apitest.Scheme(), resourceclaim.AdminAccess{})
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		gate, update, old bool
		wantKept          bool
	}{
		{name: "create, gate on", gate: true, wantKept: true},
		{name: "create, gate off"},
		{name: "update, gate off, old does not use it", update: true},
		{name: "update, gate off, old uses it", update: true, old: true, wantKept: true},
		{name: "update, gate on", gate: true, update: true, wantKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADerivedAttributes, tc.gate)
			template := testTemplate(withDerivedAttributes)
			switch {
			case !tc.update:
				strategy.PrepareForCreate(ctx, template)
			case tc.old:
				strategy.PrepareForUpdate(ctx, template, testTemplate(withDerivedAttributes))
			default:
				strategy.PrepareForUpdate(ctx, template, testTemplate())
			}
			got := template.Spec.Spec.Devices.Requests[0].Exactly.DerivedAttributes
			if (got != nil) != tc.wantKept {
				t.Errorf("derivedAttributes %v, want kept %v", got, tc.wantKept)
			}
		})
	}
}
