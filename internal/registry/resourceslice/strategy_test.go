package resourceslice

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/testing/apitest"
)

func testSlice(mutate ...func(*resourceapi.ResourceSlice)) *resourceapi.ResourceSlice {
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "slice", ResourceVersion: "1"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			NodeName: ptr.To("node-1"),
			Pool:     resourceapi.ResourcePool{Name: "pool", Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourceapi.Device{{Name: "gpu-0"}},
		},
	}
	for _, m := range mutate {
		m(slice)
	}
	return slice
}

func TestPrepareForCreate(t *testing.T) {
	stamp := metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	tests := map[string]struct {
		slice          *resourceapi.ResourceSlice
		wantGeneration int64
		wantStamped    []bool // per taint of device 0: stamped with now
	}{
		"generation starts at 1": {
			slice:          testSlice(func(s *resourceapi.ResourceSlice) { s.Generation = 7 }),
			wantGeneration: 1,
		},
		"taint without time is stamped, explicit time kept": {
			slice: testSlice(func(s *resourceapi.ResourceSlice) {
				s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{
					{Key: "a", Effect: resourceapi.DeviceTaintEffectNoSchedule},
					{Key: "b", Effect: resourceapi.DeviceTaintEffectNoExecute, TimeAdded: &stamp},
				}
			}),
			wantGeneration: 1,
			wantStamped:    []bool{true, false},
		},
	}
	strategy := NewStrategy(apitest.Scheme())
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := time.Now().Add(-time.Second)
			strategy.PrepareForCreate(context.Background(), tc.slice)
			if tc.slice.Generation != tc.wantGeneration {
				t.Errorf("generation %d, want %d", tc.slice.Generation, tc.wantGeneration)
			}
			for i, stamped := range tc.wantStamped {
				taint := tc.slice.Spec.Devices[0].Taints[i]
				if taint.TimeAdded == nil {
					t.Fatalf("taint %d has no timeAdded", i)
				}
				if got := taint.TimeAdded.After(before); got != stamped {
					t.Errorf("taint %d stamped now: %v, want %v (%v)", i, got, stamped, taint.TimeAdded)
				}
			}
		})
	}
}

func TestPrepareForUpdate(t *testing.T) {
	old := metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	withTaint := func(timeAdded *metav1.Time) func(*resourceapi.ResourceSlice) {
		return func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: timeAdded}}
		}
	}
	tests := map[string]struct {
		old, new       *resourceapi.ResourceSlice
		wantGeneration int64
		wantTimeAdded  *metav1.Time // nil: not checked
	}{
		"no change keeps the generation": {
			old: testSlice(), new: testSlice(), wantGeneration: 1,
		},
		"label change keeps the generation": {
			old:            testSlice(),
			new:            testSlice(func(s *resourceapi.ResourceSlice) { s.Labels = map[string]string{"a": "b"} }),
			wantGeneration: 1,
		},
		"spec change bumps the generation": {
			old: testSlice(),
			new: testSlice(func(s *resourceapi.ResourceSlice) {
				s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-1"})
			}),
			wantGeneration: 2,
		},
		"taint sent without time keeps the stored time": {
			old:            testSlice(withTaint(&old)),
			new:            testSlice(withTaint(nil)),
			wantGeneration: 1,
			wantTimeAdded:  &old,
		},
	}
	strategy := NewStrategy(apitest.Scheme())
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.old.Generation = 1
			tc.new.Generation = 1
			strategy.PrepareForUpdate(context.Background(), tc.new, tc.old)
			if tc.new.Generation != tc.wantGeneration {
				t.Errorf("generation %d, want %d", tc.new.Generation, tc.wantGeneration)
			}
			if tc.wantTimeAdded != nil {
				got := tc.new.Spec.Devices[0].Taints[0].TimeAdded
				if got == nil || !got.Equal(tc.wantTimeAdded) {
					t.Errorf("timeAdded %v, want %v", got, tc.wantTimeAdded)
				}
			}
			if errs := strategy.ValidateUpdate(context.Background(), tc.new, tc.old); len(errs) > 0 {
				t.Errorf("valid update rejected: %v", errs)
			}
		})
	}
}

func TestSelectableFields(t *testing.T) {
	tests := map[string]struct {
		slice *resourceapi.ResourceSlice
		want  fields.Set
	}{
		"node-local": {
			slice: testSlice(),
			want: fields.Set{"metadata.name": "slice", "spec.nodeName": "node-1",
				"spec.driver": "gpu.example.com", "spec.pool.name": "pool"},
		},
		"network-attached": {
			slice: testSlice(func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = nil; s.Spec.AllNodes = ptr.To(true) }),
			want: fields.Set{"metadata.name": "slice", "spec.nodeName": "",
				"spec.driver": "gpu.example.com", "spec.pool.name": "pool"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, got, err := GetAttrs(tc.slice)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}
