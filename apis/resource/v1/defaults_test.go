package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/draplane/draplane/apis/resource/install"
	v1 "github.com/draplane/draplane/apis/resource/v1"
)

func TestDefaults(t *testing.T) {
	stamp := &metav1.Time{}
	tests := []struct {
		name string
		in   runtime.Object
		want runtime.Object
		// keepTimeAdded: the server fills timeAdded; compare only presence.
		checkTimeAdded bool
	}{
		{
			name: "exact request defaults to one device",
			in:   claim(v1.DeviceRequest{Name: "r", Exactly: &v1.ExactDeviceRequest{DeviceClassName: "c"}}),
			want: claim(v1.DeviceRequest{Name: "r", Exactly: &v1.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: v1.DeviceAllocationModeExactCount, Count: 1}}),
		},
		{
			name: "mode All keeps count zero",
			in:   claim(v1.DeviceRequest{Name: "r", Exactly: &v1.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: v1.DeviceAllocationModeAll}}),
			want: claim(v1.DeviceRequest{Name: "r", Exactly: &v1.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: v1.DeviceAllocationModeAll}}),
		},
		{
			name: "explicit count kept",
			in:   claim(v1.DeviceRequest{Name: "r", Exactly: &v1.ExactDeviceRequest{DeviceClassName: "c", Count: 4}}),
			want: claim(v1.DeviceRequest{Name: "r", Exactly: &v1.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: v1.DeviceAllocationModeExactCount, Count: 4}}),
		},
		{
			name: "subrequests and tolerations",
			in: claim(v1.DeviceRequest{Name: "r", FirstAvailable: []v1.DeviceSubRequest{{Name: "a", DeviceClassName: "c",
				Tolerations: []v1.DeviceToleration{{Key: "k"}, {Key: "e", Operator: v1.DeviceTolerationOpExists}}}}}),
			want: claim(v1.DeviceRequest{Name: "r", FirstAvailable: []v1.DeviceSubRequest{{Name: "a", DeviceClassName: "c",
				AllocationMode: v1.DeviceAllocationModeExactCount, Count: 1,
				Tolerations: []v1.DeviceToleration{{Key: "k", Operator: v1.DeviceTolerationOpEqual}, {Key: "e", Operator: v1.DeviceTolerationOpExists}}}}}),
		},
		{
			name:           "taint rule taint gets timeAdded",
			in:             &v1.DeviceTaintRule{Spec: v1.DeviceTaintRuleSpec{Taint: v1.DeviceTaint{Key: "k", Effect: v1.DeviceTaintEffectNoExecute}}},
			want:           &v1.DeviceTaintRule{Spec: v1.DeviceTaintRuleSpec{Taint: v1.DeviceTaint{Key: "k", Effect: v1.DeviceTaintEffectNoExecute, TimeAdded: stamp}}},
			checkTimeAdded: true,
		},
	}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.DeepCopyObject()
			scheme.Default(got)
			if tc.checkTimeAdded {
				rule := got.(*v1.DeviceTaintRule)
				if rule.Spec.Taint.TimeAdded == nil || rule.Spec.Taint.TimeAdded.IsZero() {
					t.Fatalf("timeAdded not set")
				}
				if ns := rule.Spec.Taint.TimeAdded.Nanosecond(); ns != 0 {
					t.Errorf("timeAdded not whole seconds: %d ns", ns)
				}
				rule.Spec.Taint.TimeAdded = stamp
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func claim(requests ...v1.DeviceRequest) *v1.ResourceClaim {
	return &v1.ResourceClaim{Spec: v1.ResourceClaimSpec{Devices: v1.DeviceClaim{Requests: requests}}}
}
