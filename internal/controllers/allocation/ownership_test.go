package allocation

import (
	"slices"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestOwnDevices: only the devices marked with the owner key stay, marked
// in their slice or by a rule (by driver, pool or device, or all), the
// mark is taken off them and out of the rules, other taints and rules
// stay, and the cached slices are not changed.
func TestOwnDevices(t *testing.T) {
	const key = DefaultOwnerTaintKey
	mark := resourceapi.DeviceTaint{Key: key, Value: "draplane", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	other := resourceapi.DeviceTaint{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	slice := func(pool string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: pool}}}
		s.Spec.Devices = devices
		return s
	}
	device := func(name string, taints ...resourceapi.DeviceTaint) resourceapi.Device {
		return resourceapi.Device{Name: name, Taints: taints}
	}
	rule := func(name string, taint resourceapi.DeviceTaint, selector *resourceapi.DeviceTaintSelector) *resourceapi.DeviceTaintRule {
		r := &resourceapi.DeviceTaintRule{Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: selector, Taint: taint}}
		r.Name = name
		return r
	}
	tests := map[string]struct {
		slices []*resourceapi.ResourceSlice
		rules  []*resourceapi.DeviceTaintRule
		// want: "<pool>/<device>[:<taint keys>]" of the devices kept.
		want      []string
		wantRules []string
	}{
		"nothing marked: nothing owned": {
			slices: []*resourceapi.ResourceSlice{slice("a", device("gpu-0"), device("gpu-1", other))},
		},
		"marked in the slice, the mark taken off, other taints kept": {
			slices: []*resourceapi.ResourceSlice{slice("a", device("gpu-0", mark, other), device("gpu-1"))},
			want:   []string{"a/gpu-0:example.com/broken"},
		},
		"a rule for a pool": {
			slices:    []*resourceapi.ResourceSlice{slice("a", device("gpu-0")), slice("b", device("gpu-0"))},
			rules:     []*resourceapi.DeviceTaintRule{rule("owns-a", mark, &resourceapi.DeviceTaintSelector{Pool: ptr("a")}), rule("broken", other, nil)},
			want:      []string{"a/gpu-0:"},
			wantRules: []string{"broken"},
		},
		"a rule for one device of another driver marks nothing here": {
			slices: []*resourceapi.ResourceSlice{slice("a", device("gpu-0"))},
			rules:  []*resourceapi.DeviceTaintRule{rule("owns", mark, &resourceapi.DeviceTaintSelector{Driver: ptr("nic.example.com"), Device: ptr("gpu-0")})},
		},
		"a rule for one device": {
			slices: []*resourceapi.ResourceSlice{slice("a", device("gpu-0"), device("gpu-1"))},
			rules:  []*resourceapi.DeviceTaintRule{rule("owns", mark, &resourceapi.DeviceTaintSelector{Driver: ptr("gpu.example.com"), Device: ptr("gpu-1")})},
			want:   []string{"a/gpu-1:"},
		},
		"a rule without selector marks everything": {
			slices: []*resourceapi.ResourceSlice{slice("a", device("gpu-0")), slice("b", device("gpu-1"))},
			rules:  []*resourceapi.DeviceTaintRule{rule("owns", mark, nil)},
			want:   []string{"a/gpu-0:", "b/gpu-1:"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var before []*resourceapi.ResourceSlice
			for _, s := range tc.slices {
				before = append(before, s.DeepCopy())
			}
			snapshot := allocator.Snapshot{Slices: slices.Clone(tc.slices), TaintRules: tc.rules}
			ownDevices(&snapshot, key)
			var got []string
			for _, s := range snapshot.Slices {
				for _, d := range s.Spec.Devices {
					entry := s.Spec.Pool.Name + "/" + d.Name + ":"
					for i, taint := range d.Taints {
						if i > 0 {
							entry += ","
						}
						entry += taint.Key
					}
					got = append(got, entry)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("owned devices %v, want %v", got, tc.want)
			}
			var rules []string
			for _, r := range snapshot.TaintRules {
				rules = append(rules, r.Name)
			}
			if !slices.Equal(rules, tc.wantRules) {
				t.Errorf("taint rules %v, want %v", rules, tc.wantRules)
			}
			if !apiequality.Semantic.DeepEqual(before, tc.slices) {
				t.Errorf("the cached slices were changed")
			}
		})
	}
}
