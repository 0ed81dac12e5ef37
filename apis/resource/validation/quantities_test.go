package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestHugeQuantities: a quantity far outside int64 is refused at its field
// before anything compares it (which would compute 10^exponent: minutes of
// CPU for 1e999999999, found by FuzzValidate), in slices, claims and
// templates, on create and update; values within int64 pass.
func TestHugeQuantities(t *testing.T) {
	const capacity = "spec.devices[0].capacity[cores]"
	tests := map[string]struct {
		value string
		want  []string
	}{
		"huge exponent":       {value: "1e999999999", want: []string{invalid(capacity + ".value")}},
		"huge negative":       {value: "-1e999999999", want: []string{invalid(capacity + ".value")}},
		"long mantissa":       {value: "123456789012345678901234567890", want: []string{invalid(capacity + ".value")}},
		"just over int64":     {value: "9223372036854775808", want: []string{invalid(capacity + ".value")}},
		"int64 max":           {value: "9223372036854775807"},
		"nineteen digits ok":  {value: "1e18"},
		"binary suffix":       {value: "4Ei"},
		"tiny":                {value: "1n"},
		"zero, huge exponent": {value: "0e999999999"},
		"just under int64":    {value: "-9223372036854775809", want: []string{invalid(capacity + ".value")}},
		"exponent over int64": {value: "1e19", want: []string{invalid(capacity + ".value")}},
		"milli":               {value: "9223372036854775807m"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			slice := validSlice()
			q := resource.MustParse(tc.value)
			slice.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"cores": {Value: q}}
			assertErrors(t, ValidateResourceSlice(slice), tc.want)
			old := validSlice()
			slice.ResourceVersion, old.ResourceVersion = "1", "1"
			assertErrors(t, ValidateResourceSliceUpdate(slice, old), tc.want)

			claim := validClaim()
			claim.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{
				Requests: map[resourceapi.QualifiedName]resource.Quantity{"cores": q}}
			var wantClaim []string
			if len(tc.want) > 0 {
				wantClaim = []string{invalid("spec.devices.requests[0].exactly.capacity.requests[cores]")}
			}
			assertErrors(t, ValidateResourceClaim(claim), wantClaim)
			template := &resourceapi.ResourceClaimTemplate{ObjectMeta: claim.ObjectMeta, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claim.Spec}}
			if len(tc.want) > 0 {
				wantClaim = []string{invalid("spec.spec.devices.requests[0].exactly.capacity.requests[cores]")}
			}
			assertErrors(t, ValidateResourceClaimTemplate(template), wantClaim)
		})
	}
}

func TestHugeQuantityInAPolicyIsNotCompared(t *testing.T) {
	huge := resource.MustParse("1e999999999")
	slice := validSlice()
	sharedCores(slice, &resourceapi.CapacityRequestPolicy{Default: &huge, ValidValues: []resource.Quantity{huge}})
	assertErrors(t, ValidateResourceSlice(slice), []string{
		invalid("spec.devices[0].capacity[cores].requestPolicy.default"),
		invalid("spec.devices[0].capacity[cores].requestPolicy.validValues[0]"),
	})
}
