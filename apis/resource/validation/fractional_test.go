package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// sharedCores makes the first device shareable with 8 cores and the given
// policy.
func sharedCores(s *resourceapi.ResourceSlice, policy *resourceapi.CapacityRequestPolicy) {
	s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	s.Spec.Devices[0].Capacity["cores"] = resourceapi.DeviceCapacity{Value: resource.MustParse("8"), RequestPolicy: policy}
}

func coresRange(defaultValue, minValue, maxValue, step string) *resourceapi.CapacityRequestPolicy {
	r := &resourceapi.CapacityRequestPolicyRange{Min: quantity(minValue)}
	if maxValue != "" {
		r.Max = quantity(maxValue)
	}
	if step != "" {
		r.Step = quantity(step)
	}
	return &resourceapi.CapacityRequestPolicy{Default: quantity(defaultValue), ValidRange: r}
}

// TestFractionalCapacityRangeGate: as upstream, the step of a validRange
// is checked on the integers the values round up to while
// DRAFractionalCapacityRange is off, and in milli-units when it is on and
// a value has a fraction; validValues are told apart the same way.
func TestFractionalCapacityRangeGate(t *testing.T) {
	const policy = "spec.devices[0].capacity[cores].requestPolicy"
	tests := map[string]struct {
		policy          *resourceapi.CapacityRequestPolicy
		wantOff, wantOn []string
	}{
		"step 300m, default 1: a whole step only when rounded up": {
			policy: coresRange("1", "0", "", "300m"),
			wantOn: []string{invalid(policy + ".validRange.step")},
		},
		"fractional default 1500m, step 1": {
			policy: coresRange("1500m", "0", "", "1"),
			wantOn: []string{invalid(policy + ".validRange.step")},
		},
		"step 1500m, max 3: off step only when rounded up": {
			policy:  coresRange("1500m", "0", "3", "1500m"),
			wantOff: []string{invalid(policy + ".validRange.step")},
		},
		"quarter steps": {
			policy: coresRange("1500m", "500m", "2", "250m"),
		},
		"min finer than milli": {
			policy: coresRange("1", "100u", "", ""),
			wantOn: []string{invalid(policy + ".validRange.min")},
		},
		"negative min with a step": {
			policy:  coresRange("0", "-1", "", "1"),
			wantOff: []string{invalid(policy + ".validRange.min")},
			wantOn:  []string{invalid(policy + ".validRange.min")},
		},
		"valid values 500m and 1: the same integer": {
			policy:  &resourceapi.CapacityRequestPolicy{Default: quantity("1"), ValidValues: quantities("500m", "1")},
			wantOff: []string{duplicate(policy + ".validValues[1]")},
		},
	}
	for name, tc := range tests {
		for _, on := range []bool{false, true} {
			gate := map[bool]string{false: "off", true: "on"}[on]
			t.Run(name+"/gate "+gate, func(t *testing.T) {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAFractionalCapacityRange, on)
				slice := validSlice()
				sharedCores(slice, tc.policy)
				want := tc.wantOff
				if on {
					want = tc.wantOn
				}
				assertErrors(t, ValidateResourceSlice(slice), want)
			})
		}
	}
}

// TestFractionalCapacityRangeRatchet: a range stored while the gate was on
// keeps the slice writable with the gate off as long as the capacity is
// not changed; a changed capacity is checked under the current gate.
func TestFractionalCapacityRangeRatchet(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAFractionalCapacityRange, true)
	stored := validSlice()
	sharedCores(stored, coresRange("1500m", "0", "3", "1500m"))
	assertErrors(t, ValidateResourceSlice(stored), nil)
	stored.ResourceVersion = "1"

	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAFractionalCapacityRange, false)
	tests := map[string]struct {
		mutate func(*resourceapi.ResourceSlice)
		want   []string
	}{
		"capacity unchanged": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation++ }},
		"capacity changed": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedCores(s, coresRange("1500m", "0", "3", "1500m"))
			s.Spec.Devices[0].Capacity["cores"] = resourceapi.DeviceCapacity{Value: resource.MustParse("16"), RequestPolicy: s.Spec.Devices[0].Capacity["cores"].RequestPolicy}
		}, want: []string{invalid("spec.devices[0].capacity[cores].requestPolicy.validRange.step")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			slice := stored.DeepCopy()
			tc.mutate(slice)
			assertErrors(t, ValidateResourceSliceUpdate(slice, stored), tc.want)
		})
	}
}
