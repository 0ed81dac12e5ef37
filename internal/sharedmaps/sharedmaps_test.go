package sharedmaps

import (
	"reflect"
	"strconv"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

func gpu(model string, index int64, memory string) resourceapi.Device {
	return resourceapi.Device{
		Name: "gpu-" + strconv.FormatInt(index, 10),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"model": {StringValue: ptr.To(model)},
			"index": {IntValue: ptr.To(index)},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse(memory)},
		},
	}
}

func slice(devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: devices}}
}

// same reports whether two maps are one map.
func same(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return !va.IsNil() && va.UnsafePointer() == vb.UnsafePointer()
}

func TestShare(t *testing.T) {
	listAttr := gpu("a100", 0, "80Gi")
	listAttr.Attributes["cores"] = resourceapi.DeviceAttribute{IntValues: []int64{1, 2}}
	twoValues := gpu("a100", 0, "80Gi")
	twoValues.Attributes["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To("a100"), IntValue: ptr.To(int64(1))}
	policy := gpu("a100", 0, "80Gi")
	policy.Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("80Gi"),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi"))}}
	// Without the lengths in the key, "ab"+"c" and "a"+"bc" would read
	// the same.
	collideA := resourceapi.Device{Name: "x", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"ab": {StringValue: ptr.To("c")}}}
	collideB := resourceapi.Device{Name: "x", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"a": {StringValue: ptr.To("bc")}}}
	versionVsString := resourceapi.Device{Name: "x", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {VersionValue: ptr.To("1.0.0")}}}
	stringVsVersion := resourceapi.Device{Name: "x", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {StringValue: ptr.To("1.0.0")}}}

	for name, tc := range map[string]struct {
		a, b                     resourceapi.Device
		sharedAttrs, sharedCapac bool
	}{
		"identical devices on two nodes":       {a: gpu("a100", 3, "80Gi"), b: gpu("a100", 3, "80Gi"), sharedAttrs: true, sharedCapac: true},
		"another index, same memory":           {a: gpu("a100", 3, "80Gi"), b: gpu("a100", 4, "80Gi"), sharedCapac: true},
		"another memory":                       {a: gpu("a100", 3, "80Gi"), b: gpu("a100", 3, "40Gi"), sharedAttrs: true},
		"same memory, other format":            {a: gpu("a100", 3, "80Gi"), b: gpu("a100", 3, "85899345920"), sharedAttrs: true},
		"list attribute":                       {a: listAttr, b: *listAttr.DeepCopy(), sharedCapac: true},
		"two values in one attribute":          {a: twoValues, b: *twoValues.DeepCopy(), sharedCapac: true},
		"request policy":                       {a: policy, b: *policy.DeepCopy(), sharedAttrs: true},
		"names and values do not run together": {a: collideA, b: collideB},
		"version and string differ":            {a: versionVsString, b: stringVsVersion},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := slice(tc.a), slice(tc.b)
			wantA, wantB := a.DeepCopy(), b.DeepCopy()
			Share(a)
			Share(b)
			da, db := a.Spec.Devices[0], b.Spec.Devices[0]
			if got := same(da.Attributes, db.Attributes); got != tc.sharedAttrs {
				t.Errorf("attributes shared: %v, want %v", got, tc.sharedAttrs)
			}
			if got := same(da.Capacity, db.Capacity); got != tc.sharedCapac {
				t.Errorf("capacity shared: %v, want %v", got, tc.sharedCapac)
			}
			// Sharing never changes what a slice says or how it
			// serializes.
			if !apiequality.Semantic.DeepEqual(a, wantA) || !apiequality.Semantic.DeepEqual(b, wantB) {
				t.Errorf("content changed:\n%+v\n%+v", a.Spec.Devices, b.Spec.Devices)
			}
		})
	}
}

func TestShareV1(t *testing.T) {
	device := func() resourcev1.Device {
		return resourcev1.Device{
			Name:       "gpu-0",
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("a100")}},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		}
	}
	a := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Devices: []resourcev1.Device{device()}}}
	b := a.DeepCopy()
	empty := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Devices: []resourcev1.Device{{Name: "bare"}}}}
	Share(a)
	Share(b)
	Share(empty)
	if !same(a.Spec.Devices[0].Attributes, b.Spec.Devices[0].Attributes) || !same(a.Spec.Devices[0].Capacity, b.Spec.Devices[0].Capacity) {
		t.Error("identical v1 devices do not share their maps")
	}
	if empty.Spec.Devices[0].Attributes != nil || empty.Spec.Devices[0].Capacity != nil {
		t.Errorf("a device without maps got some: %+v", empty.Spec.Devices[0])
	}
}

// TestShareBounded: devices whose maps all differ do not grow a table
// beyond maxShared, and sharing goes on after it starts over.
func TestShareBounded(t *testing.T) {
	for i := range maxShared + 10 {
		Share(slice(gpu("bounded", int64(i), "1Gi")))
		if n := len(attributes.maps); n > maxShared {
			t.Fatalf("%d attribute maps kept after %d devices, want at most %d", n, i+1, maxShared)
		}
	}
	a, b := slice(gpu("bounded", 1, "1Gi")), slice(gpu("bounded", 1, "1Gi"))
	Share(a)
	Share(b)
	if !same(a.Spec.Devices[0].Attributes, b.Spec.Devices[0].Attributes) {
		t.Error("no sharing after the table started over")
	}
}

// BenchmarkShare: a decoded slice of 8 devices whose maps are kept
// already, as the watch cache and the informers share them.
func BenchmarkShare(b *testing.B) {
	devices := make([]resourcev1.Device, 8)
	for i := range devices {
		devices[i] = resourcev1.Device{
			Name: "gpu-" + strconv.Itoa(i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model":         {StringValue: ptr.To("a100")},
				"index":         {IntValue: ptr.To(int64(i))},
				"pcieRoot":      {StringValue: ptr.To("pci0000:0" + strconv.Itoa(i/4))},
				"driverVersion": {VersionValue: ptr.To("1.2.3")},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		}
	}
	slice := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Devices: devices}}
	Share(slice.DeepCopy())
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s := slice.DeepCopy()
		b.StartTimer()
		Share(s)
	}
}
