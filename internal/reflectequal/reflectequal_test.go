package reflectequal

import (
	"math"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

func pod(image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "c", Image: image, Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}},
		},
	}
}

func slice(devices int, memory string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To("node-1"), Pool: resourcev1.ResourcePool{Name: "node-1", ResourceSliceCount: 1}},
	}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name:       "gpu-" + string(rune('a'+i)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("x")}, "index": {IntValue: ptr.To(int64(i))}},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}},
		})
	}
	return s
}

// TestEqual: Equal finds equal what reflect.DeepEqual finds equal, in API
// objects and in what they are made of, and never finds equal what
// reflect.DeepEqual does not.
func TestEqual(t *testing.T) {
	utc := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	local := metav1.NewTime(utc.Local())
	nan := math.NaN()
	shared := []string{"a"}
	type holder struct{ Any interface{} }
	type funcs struct{ Func func() }
	cases := map[string]struct {
		l, r interface{}
		want bool
	}{
		"equal pods":              {pod("i:1"), pod("i:1"), true},
		"pods, image":             {pod("i:1"), pod("i:2"), false},
		"equal slices":            {slice(8, "80Gi"), slice(8, "80Gi"), true},
		"slices, devices":         {slice(8, "80Gi"), slice(7, "80Gi"), false},
		"slices, quantity":        {slice(8, "80Gi"), slice(8, "81Gi"), false},
		"quantities":              {resource.MustParse("1"), resource.MustParse("1"), true},
		"quantities, spelling":    {resource.MustParse("1"), resource.MustParse("1000m"), false},
		"times":                   {utc, metav1.NewTime(utc.Time), true},
		"times, location":         {utc, local, false},
		"NaN":                     {nan, nan, false},
		"nil and empty slice":     {[]string(nil), []string{}, false},
		"one slice":               {shared, shared, true},
		"nil and empty map":       {map[string]string(nil), map[string]string{}, false},
		"maps":                    {map[string]string{"a": "b"}, map[string]string{"a": "b"}, true},
		"maps, value":             {map[string]string{"a": "b"}, map[string]string{"a": "c"}, false},
		"maps, key":               {map[string]string{"a": "b"}, map[string]string{"c": "b"}, false},
		"interfaces":              {holder{Any: int64(1)}, holder{Any: int64(1)}, true},
		"interfaces, types":       {holder{Any: int64(1)}, holder{Any: int32(1)}, false},
		"nil functions":           {funcs{}, funcs{}, false},
		"types":                   {int32(1), int64(1), false},
		"pointers, one nil":       {&corev1.PodSpec{}, (*corev1.PodSpec)(nil), false},
		"pointers to equal specs": {&corev1.PodSpec{NodeName: "n"}, &corev1.PodSpec{NodeName: "n"}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Equal(tc.l, tc.r)
			if got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
			if got && !reflect.DeepEqual(tc.l, tc.r) {
				t.Errorf("Equal found equal what reflect.DeepEqual does not")
			}
		})
	}
}

// BenchmarkEqual: a slice of eight devices against an equal copy, with
// Equal and with reflect.DeepEqual.
func BenchmarkEqual(b *testing.B) {
	l, r := slice(8, "80Gi"), slice(8, "80Gi")
	b.Run("reflectequal", func(b *testing.B) {
		for b.Loop() {
			if !Equal(l, r) {
				b.Fatal("unequal")
			}
		}
	})
	b.Run("reflect.DeepEqual", func(b *testing.B) {
		for b.Loop() {
			if !reflect.DeepEqual(l, r) {
				b.Fatal("unequal")
			}
		}
	})
}
