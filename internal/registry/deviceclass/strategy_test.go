package deviceclass

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/testing/apitest"
)

func testClass(mutate ...func(*resourceapi.DeviceClass)) *resourceapi.DeviceClass {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com", ResourceVersion: "1", Generation: 1},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`},
		}}},
	}
	for _, m := range mutate {
		m(class)
	}
	return class
}

func TestGeneration(t *testing.T) {
	tests := map[string]struct {
		old, new       *resourceapi.DeviceClass
		wantGeneration int64
	}{
		"metadata change": {
			old: testClass(), new: testClass(func(c *resourceapi.DeviceClass) { c.Labels = map[string]string{"a": "b"} }),
			wantGeneration: 1,
		},
		"selector change": {
			old: testClass(),
			new: testClass(func(c *resourceapi.DeviceClass) {
				c.Spec.Selectors[0].CEL.Expression = `device.driver == "other.example.com"`
			}),
			wantGeneration: 2,
		},
	}
	strategy := NewStrategy(apitest.Scheme())
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			strategy.PrepareForUpdate(context.Background(), tc.new, tc.old)
			if tc.new.Generation != tc.wantGeneration {
				t.Errorf("generation %d, want %d", tc.new.Generation, tc.wantGeneration)
			}
			if errs := strategy.ValidateUpdate(context.Background(), tc.new, tc.old); len(errs) != 0 {
				t.Errorf("valid update rejected: %v", errs)
			}
		})
	}
	created := testClass(func(c *resourceapi.DeviceClass) { c.Generation = 9 })
	strategy.PrepareForCreate(context.Background(), created)
	if created.Generation != 1 {
		t.Errorf("generation after create %d, want 1", created.Generation)
	}
}
