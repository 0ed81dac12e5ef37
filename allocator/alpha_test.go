package allocator

import (
	"context"
	"reflect"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

func listAttr(name string, values ...int64) devOpt {
	return func(d *resourceapi.Device) {
		d.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{IntValues: values}
	}
}

// TestSkipNodeOperationsCopied: the allocation result carries the slice's
// skipNodeOperations while DRAOptionalNodeOperations is on, and nothing
// while it is off.
func TestSkipNodeOperationsCopied(t *testing.T) {
	for _, gate := range []bool{true, false} {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAOptionalNodeOperations, gate)
		slice := mkSlice("p", "n1", devs("d0"))
		slice.Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
		in := instance{classes: classes(mkClass("gpu")), node: mkNode("n1"), slices: []*resourceapi.ResourceSlice{slice},
			claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}}
		res, err := runChecked(context.Background(), newTestAllocator(), &in)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Fits() {
			t.Fatal(res.Explanation.Summary())
		}
		var want []resourceapi.SkipNodeOperation
		if gate {
			want = slice.Spec.SkipNodeOperations
		}
		if got := res.Allocations[0].Devices.Results[0].SkipNodeOperations; !reflect.DeepEqual(got, want) {
			t.Errorf("gate %v: skipNodeOperations %v, want %v", gate, got, want)
		}
	}
}

// TestListAttributes: CEL selectors see list attributes as lists; a
// constraint over an attribute that a device publishes as a list is
// refused with a reason naming it rather than compared as if the devices
// lacked it.
func TestListAttributes(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAListTypeAttributes, true)
	a := New(Options{})
	in := instance{classes: classes(mkClass("gpu")), node: mkNode("n1"),
		slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
			mkDev("d0", listAttr("numa", 0, 1), intAttr("index", 0)), mkDev("d1", listAttr("numa", 2, 3), intAttr("index", 1))})}}

	in.claims = []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector(`3 in device.attributes["`+testDriver+`"].numa`)))}
	res, err := a.Allocate(context.Background(), a.Prepare(in.snapshot()).State(nil), in.claims, in.node)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Fits() || res.Allocations[0].Devices.Results[0].Device != "d1" {
		t.Errorf("selector over a list attribute: got %v %s, want d1", picked(res), res.Explanation.Summary())
	}

	for _, match := range []bool{true, false} {
		in.claims = []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r", "gpu", 2)), match, testDriver+"/numa")}
		res, err = a.Allocate(context.Background(), a.Prepare(in.snapshot()).State(nil), in.claims, in.node)
		if err != nil {
			t.Fatal(err)
		}
		if res.Fits() {
			t.Errorf("constraint (match %v) over a list attribute: allocated %v", match, picked(res))
			continue
		}
		summary := res.Explanation.Summary()
		if !strings.Contains(summary, testDriver+"/numa") || !strings.Contains(summary, "list attribute") {
			t.Errorf("constraint (match %v) over a list attribute: reason %q does not name the attribute as a list", match, summary)
		}
	}

	// Constraints over scalar attributes are unaffected.
	in.claims = []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r", "gpu", 2)), false, testDriver+"/index")}
	res, err = a.Allocate(context.Background(), a.Prepare(in.snapshot()).State(nil), in.claims, in.node)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Fits() {
		t.Errorf("distinctAttribute over a scalar attribute: %s", res.Explanation.Summary())
	}
}
