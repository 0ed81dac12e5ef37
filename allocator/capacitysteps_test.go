package allocator

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestWholeUnitCapacitySteps: with DRAFractionalCapacityRange off
// (Snapshot.WholeUnitCapacitySteps) upstream rounds the request, min and
// step of a capacity range to whole units before stepping; with it on,
// steps are taken in milli-units.
func TestWholeUnitCapacitySteps(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name                string
		min, step, max, req string
		wantMilli           string // consumed with milli-unit steps
		wantWhole           string // consumed with whole-unit steps
	}{
		{name: "quarter step", min: "0", step: "250m", req: "300m", wantMilli: "500m", wantWhole: "1"},
		{name: "fractional min", min: "500m", step: "1", req: "1200m", wantMilli: "1500m", wantWhole: "2"},
		{name: "whole min and step", min: "0", step: "2", req: "1500m", wantMilli: "2", wantWhole: "2"},
		{name: "below min", min: "500m", step: "1", req: "100m", wantMilli: "500m", wantWhole: "500m"},
		{name: "rounded past max", min: "0", step: "250m", max: "500m", req: "400m", wantMilli: "500m", wantWhole: ""},
	}
	gpu := mkClass("gpu")
	for _, tc := range tests {
		for _, whole := range []bool{false, true} {
			name := tc.name + map[bool]string{false: "/milli", true: "/whole"}[whole]
			t.Run(name, func(t *testing.T) {
				r := &resourceapi.CapacityRequestPolicyRange{Min: new(q(tc.min)), Step: new(q(tc.step))}
				if tc.max != "" {
					r.Max = new(q(tc.max))
				}
				slice := mkSlice("p", "n1", []resourceapi.Device{mkDev("cpu", shared("cores", 8, &resourceapi.CapacityRequestPolicy{Default: new(q(tc.min)), ValidRange: r}))})
				req := mkReq("r", "gpu", 1)
				req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"cores": q(tc.req)}}
				a := newTestAllocator()
				inv := a.Prepare(Snapshot{Classes: classes(gpu), Slices: []*resourceapi.ResourceSlice{slice}, WholeUnitCapacitySteps: whole})
				res, err := a.Allocate(context.Background(), inv.State(NewInUse()), []*resourceapi.ResourceClaim{mkClaim("c", req)}, mkNode("n1"))
				if err != nil {
					t.Fatal(err)
				}
				want := tc.wantMilli
				if whole {
					want = tc.wantWhole
				}
				if !res.Fits() {
					if want != "" {
						t.Fatalf("not allocated: %v", res.Explanation)
					}
					return
				}
				if want == "" {
					t.Fatalf("allocated, want refused: %+v", res.Allocations[0].Devices.Results)
				}
				got := res.Allocations[0].Devices.Results[0].ConsumedCapacity["cores"]
				if got.Cmp(q(want)) != 0 {
					t.Errorf("consumed %s, want %s", got.String(), want)
				}
			})
		}
	}
}
