package validation

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// TestRequestPolicyFieldPaths: each error about a capacity's requestPolicy
// is reported at the field upstream's validation reports it at: a default
// that validValues do not list at validValues, a default outside a
// validRange at validRange.default, and a default or max off the step at
// validRange.step.
func TestRequestPolicyFieldPaths(t *testing.T) {
	const policy = "spec.devices[0].capacity[cores].requestPolicy"
	const valueRange = policy + ".validRange"
	values := func(defaultValue string, v ...string) *resourceapi.CapacityRequestPolicy {
		return &resourceapi.CapacityRequestPolicy{Default: quantity(defaultValue), ValidValues: quantities(v...)}
	}
	tests := map[string]struct {
		policy     *resourceapi.CapacityRequestPolicy
		fractional bool
		want       []string
	}{
		"values and range": {policy: &resourceapi.CapacityRequestPolicy{Default: quantity("1"), ValidValues: quantities("1"),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1")}}, want: []string{forbidden(policy)}},
		"values without default":   {policy: &resourceapi.CapacityRequestPolicy{ValidValues: quantities("1")}, want: []string{required(policy + ".default")}},
		"default not a value":      {policy: values("3", "1", "2"), want: []string{invalid(policy + ".validValues")}},
		"values unsorted":          {policy: values("1", "2", "1"), want: []string{invalid(policy + ".validValues[1]")}},
		"values duplicate":         {policy: values("1", "1", "2", "2"), want: []string{duplicate(policy + ".validValues[2]")}},
		"value over capacity":      {policy: values("1", "1", "9"), want: []string{invalid(policy + ".validValues[1]")}},
		"11 values":                {policy: values("1", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"), want: []string{tooMany(policy + ".validValues")}},
		"range without default":    {policy: &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1")}}, want: []string{required(policy + ".default")}},
		"range without min":        {policy: &resourceapi.CapacityRequestPolicy{Default: quantity("1"), ValidRange: &resourceapi.CapacityRequestPolicyRange{}}, want: []string{required(valueRange + ".min")}},
		"min over capacity":        {policy: coresRange("9", "9", "", ""), want: []string{invalid(valueRange + ".min")}},
		"default below min":        {policy: coresRange("1", "2", "", ""), want: []string{invalid(valueRange + ".default")}},
		"default above max":        {policy: coresRange("5", "1", "4", ""), want: []string{invalid(valueRange + ".default")}},
		"min above max":            {policy: coresRange("3", "3", "2", ""), want: []string{invalid(valueRange + ".default"), invalid(valueRange + ".max")}},
		"max over capacity":        {policy: coresRange("1", "1", "9", ""), want: []string{invalid(valueRange + ".max")}},
		"step zero":                {policy: coresRange("1", "1", "", "0"), want: []string{invalid(valueRange + ".step")}},
		"one step over capacity":   {policy: coresRange("1", "1", "", "8"), want: []string{invalid(valueRange + ".step")}},
		"default off step":         {policy: coresRange("2", "1", "", "2"), want: []string{invalid(valueRange + ".step")}},
		"max off step":             {policy: coresRange("1", "1", "4", "2"), want: []string{invalid(valueRange + ".step")}},
		"negative with a step":     {policy: coresRange("-1", "-1", "", "1"), want: []string{invalid(valueRange + ".default"), invalid(valueRange + ".min")}},
		"default finer than milli": {policy: coresRange("1500u", "0", "", "1"), fractional: true, want: []string{invalid(valueRange + ".default")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAFractionalCapacityRange, tc.fractional)
			slice := validSlice()
			sharedCores(slice, tc.policy)
			assertErrors(t, ValidateResourceSlice(slice), tc.want)
		})
	}
}
