package v1beta1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	v1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/apis/resource/v1beta1"
)

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return scheme
}

func TestDeviceRequestConversion(t *testing.T) {
	selectors := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}
	betaSelectors := []v1beta1.DeviceSelector{{CEL: &v1beta1.CELDeviceSelector{Expression: "true"}}}
	tolerations := []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	betaTolerations := []v1beta1.DeviceToleration{{Key: "k", Operator: v1beta1.DeviceTolerationOpExists, Effect: v1beta1.DeviceTaintEffectNoSchedule}}
	capacity := &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}}
	betaCapacity := &v1beta1.CapacityRequirements{Requests: map[v1beta1.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}}
	subRequests := []resourceapi.DeviceSubRequest{{Name: "big", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
	betaSubRequests := []v1beta1.DeviceSubRequest{{Name: "big", DeviceClassName: "gpu", AllocationMode: v1beta1.DeviceAllocationModeExactCount, Count: 1}}

	tests := []struct {
		name string
		beta v1beta1.DeviceRequest
		hub  resourceapi.DeviceRequest
		// oneWay: the hub form does not convert back to exactly this beta form.
		oneWay bool
	}{
		{
			name: "flat request becomes exactly",
			beta: v1beta1.DeviceRequest{Name: "gpu", DeviceClassName: "gpu.example.com", Selectors: betaSelectors,
				AllocationMode: v1beta1.DeviceAllocationModeExactCount, Count: 2, AdminAccess: ptr.To(true),
				Tolerations: betaTolerations, Capacity: betaCapacity},
			hub: resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com",
				Selectors: selectors, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2, AdminAccess: ptr.To(true),
				Tolerations: tolerations, Capacity: capacity}},
		},
		{
			name: "mode All without count",
			beta: v1beta1.DeviceRequest{Name: "all", DeviceClassName: "c", AllocationMode: v1beta1.DeviceAllocationModeAll},
			hub:  resourceapi.DeviceRequest{Name: "all", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: resourceapi.DeviceAllocationModeAll}},
		},
		{
			name: "firstAvailable only",
			beta: v1beta1.DeviceRequest{Name: "r", FirstAvailable: betaSubRequests},
			hub:  resourceapi.DeviceRequest{Name: "r", FirstAvailable: subRequests},
		},
		{
			name: "flat fields and firstAvailable both kept for validation to reject",
			beta: v1beta1.DeviceRequest{Name: "r", DeviceClassName: "c", Count: 1, FirstAvailable: betaSubRequests},
			hub:  resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c", Count: 1}, FirstAvailable: subRequests},
		},
		{
			name: "a stray flat field without a class still becomes exactly",
			beta: v1beta1.DeviceRequest{Name: "r", Count: 3},
			hub:  resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{Count: 3}},
		},
		{
			name: "empty request stays empty",
			beta: v1beta1.DeviceRequest{Name: "r"},
			hub:  resourceapi.DeviceRequest{Name: "r"},
		},
		{
			name:   "an exactly with nothing set has no flat form",
			beta:   v1beta1.DeviceRequest{Name: "r"},
			hub:    resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{}},
			oneWay: true,
		},
	}
	scheme := newScheme()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.oneWay {
				var hub resourceapi.DeviceRequest
				if err := scheme.Convert(&tc.beta, &hub, nil); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.hub, hub); diff != "" {
					t.Errorf("v1beta1 -> hub (-want +got):\n%s", diff)
				}
			}
			var beta v1beta1.DeviceRequest
			if err := scheme.Convert(&tc.hub, &beta, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.beta, beta); diff != "" {
				t.Errorf("hub -> v1beta1 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeviceConversion(t *testing.T) {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("a100")}}
	betaAttrs := map[v1beta1.QualifiedName]v1beta1.DeviceAttribute{"model": {StringValue: ptr.To("a100")}}
	tests := []struct {
		name   string
		beta   v1beta1.Device
		hub    resourceapi.Device
		oneWay bool
	}{
		{
			name: "basic is unwrapped",
			beta: v1beta1.Device{Name: "gpu-0", Basic: &v1beta1.BasicDevice{Attributes: betaAttrs, NodeName: ptr.To("n1"),
				Taints: []v1beta1.DeviceTaint{{Key: "k", Effect: v1beta1.DeviceTaintEffectNoExecute}}, BindsToNode: ptr.To(true),
				BindingConditions: []string{"ready"}, AllowMultipleAllocations: ptr.To(true),
				ConsumesCounters: []v1beta1.DeviceCounterConsumption{{CounterSet: "s", Counters: map[string]v1beta1.Counter{"mem": {Value: resource.MustParse("1")}}}}}},
			hub: resourceapi.Device{Name: "gpu-0", Attributes: attrs, NodeName: ptr.To("n1"),
				Taints: []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoExecute}}, BindsToNode: ptr.To(true),
				BindingConditions: []string{"ready"}, AllowMultipleAllocations: ptr.To(true),
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "s", Counters: map[string]resourceapi.Counter{"mem": {Value: resource.MustParse("1")}}}}},
		},
		{
			name: "empty device gets an empty basic",
			beta: v1beta1.Device{Name: "d", Basic: &v1beta1.BasicDevice{}},
			hub:  resourceapi.Device{Name: "d"},
		},
		{
			name:   "device without basic has no properties",
			beta:   v1beta1.Device{Name: "d"},
			hub:    resourceapi.Device{Name: "d"},
			oneWay: true,
		},
	}
	scheme := newScheme()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hub resourceapi.Device
			if err := scheme.Convert(&tc.beta, &hub, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.hub, hub, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("v1beta1 -> hub (-want +got):\n%s", diff)
			}
			if tc.oneWay {
				return
			}
			var beta v1beta1.Device
			if err := scheme.Convert(&tc.hub, &beta, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.beta, beta, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("hub -> v1beta1 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResourceSliceSpecConversion(t *testing.T) {
	tests := []struct {
		name   string
		beta   v1beta1.ResourceSliceSpec
		hub    resourceapi.ResourceSliceSpec
		oneWay bool
	}{
		{
			name: "node name",
			beta: v1beta1.ResourceSliceSpec{Driver: "d", NodeName: "node-1"},
			hub:  resourceapi.ResourceSliceSpec{Driver: "d", NodeName: ptr.To("node-1")},
		},
		{
			name: "all nodes",
			beta: v1beta1.ResourceSliceSpec{Driver: "d", AllNodes: true},
			hub:  resourceapi.ResourceSliceSpec{Driver: "d", AllNodes: ptr.To(true)},
		},
		{
			name: "neither: both unset",
			beta: v1beta1.ResourceSliceSpec{Driver: "d", PerDeviceNodeSelection: ptr.To(true)},
			hub:  resourceapi.ResourceSliceSpec{Driver: "d", PerDeviceNodeSelection: ptr.To(true)},
		},
		{
			name:   "allNodes false in the hub is the same as unset",
			beta:   v1beta1.ResourceSliceSpec{Driver: "d"},
			hub:    resourceapi.ResourceSliceSpec{Driver: "d", AllNodes: ptr.To(false), NodeName: ptr.To("")},
			oneWay: true,
		},
	}
	scheme := newScheme()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.oneWay {
				var hub resourceapi.ResourceSliceSpec
				if err := scheme.Convert(&tc.beta, &hub, nil); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.hub, hub); diff != "" {
					t.Errorf("v1beta1 -> hub (-want +got):\n%s", diff)
				}
			}
			var beta v1beta1.ResourceSliceSpec
			if err := scheme.Convert(&tc.hub, &beta, nil); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.beta, beta); diff != "" {
				t.Errorf("hub -> v1beta1 (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFlatClaimThroughV1 is the promise of the issue: a v1beta1 claim with
// a flat request, decoded as a client sends it, reads back in v1 with
// exactly set, and converting that back gives the same v1beta1 object.
func TestFlatClaimThroughV1(t *testing.T) {
	scheme := newScheme()
	codecs := serializer.NewCodecFactory(scheme)
	body := []byte(`{
  "apiVersion": "resource.draplane.dev/v1beta1",
  "kind": "ResourceClaim",
  "metadata": {"name": "claim", "namespace": "default"},
  "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com",
    "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"a100\""}}],
    "tolerations": [{"key": "maintenance"}]}]}}
}`)
	// The server decodes into the hub with defaulting, as on a create.
	obj, _, err := codecs.UniversalDecoder(resourceapi.SchemeGroupVersion).Decode(body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hub := obj.(*resourceapi.ResourceClaim)

	var claimV1 v1.ResourceClaim
	if err := scheme.Convert(hub, &claimV1, nil); err != nil {
		t.Fatal(err)
	}
	wantV1 := v1.DeviceRequest{Name: "gpu", Exactly: &v1.ExactDeviceRequest{
		DeviceClassName: "gpu.example.com",
		Selectors:       []v1.DeviceSelector{{CEL: &v1.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "a100"`}}},
		AllocationMode:  v1.DeviceAllocationModeExactCount,
		Count:           1,
		Tolerations:     []v1.DeviceToleration{{Key: "maintenance", Operator: v1.DeviceTolerationOpEqual}},
	}}
	if diff := cmp.Diff([]v1.DeviceRequest{wantV1}, claimV1.Spec.Devices.Requests); diff != "" {
		t.Fatalf("v1 requests (-want +got):\n%s", diff)
	}

	// v1 -> hub -> v1beta1 again: the defaulted flat request, unchanged.
	var hubAgain resourceapi.ResourceClaim
	if err := scheme.Convert(&claimV1, &hubAgain, nil); err != nil {
		t.Fatal(err)
	}
	var beta v1beta1.ResourceClaim
	if err := scheme.Convert(&hubAgain, &beta, nil); err != nil {
		t.Fatal(err)
	}
	wantBeta := v1beta1.DeviceRequest{Name: "gpu", DeviceClassName: "gpu.example.com",
		Selectors:      []v1beta1.DeviceSelector{{CEL: &v1beta1.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "a100"`}}},
		AllocationMode: v1beta1.DeviceAllocationModeExactCount, Count: 1,
		Tolerations: []v1beta1.DeviceToleration{{Key: "maintenance", Operator: v1beta1.DeviceTolerationOpEqual}}}
	if diff := cmp.Diff([]v1beta1.DeviceRequest{wantBeta}, beta.Spec.Devices.Requests); diff != "" {
		t.Errorf("v1beta1 requests after the round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(metav1.ObjectMeta{Name: "claim", Namespace: "default"}, beta.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
}
