package allocator

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestWithoutBindingConditions: with the DRADeviceBindingConditions gate
// off, devices that list bindingConditions are never allocated (as
// upstream's allocator does it), while an allocation that holds one
// still counts; with it on, they are allocated like any other device.
func TestWithoutBindingConditions(t *testing.T) {
	gpu := mkClass("gpu")
	conditional := func(name string) resourceapi.Device {
		d := mkDev(name, bindingConditions("attached"))
		d.BindingFailureConditions = []string{"failed"}
		return d
	}
	slices := []*resourceapi.ResourceSlice{
		mkSlice("p1", "n1", []resourceapi.Device{conditional("bc"), mkDev("plain")}),
		mkSlice("p2", "n2", []resourceapi.Device{conditional("bc")}),
	}
	nodes := []*corev1.Node{mkNode("n1"), mkNode("n2")}
	one := []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}
	two := []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 2))}

	tests := []struct {
		name    string
		without bool
		claims  []*resourceapi.ResourceClaim
		inUse   []string
		nodes   []*corev1.Node
		want    string // "<node>:<device>,...", "" when nothing fits
	}{
		{name: "gate on: the device with binding conditions is used", claims: two, nodes: nodes[:1], want: "n1:bc,plain"},
		{name: "gate on: only device of n2", claims: one, nodes: nodes[1:], want: "n2:bc"},
		{name: "gate off: only the plain device", without: true, claims: one, nodes: nodes, want: "n1:plain"},
		{name: "gate off: two devices do not fit", without: true, claims: two, nodes: nodes[:1]},
		{name: "gate off: n2 has nothing usable", without: true, claims: one, nodes: nodes[1:]},
		{name: "gate off: allocated device still counts", without: true, claims: one, inUse: []string{"p1/plain"}, nodes: nodes[:1]},
		{name: "gate off: holding the conditional device changes nothing", without: true, claims: one, inUse: []string{"p1/bc"}, nodes: nodes[:1], want: "n1:plain"},
	}
	a := newTestAllocator()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := a.Prepare(Snapshot{Classes: classes(gpu), Slices: slices, WithoutBindingConditions: tc.without})
			u := NewInUse()
			for _, alloc := range used(tc.inUse...) {
				u.AddAllocation(alloc)
			}
			sel, err := a.SelectNode(context.Background(), inv.State(u), tc.claims, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if sel.Chosen != nil {
				got = sel.Chosen.Node + ":"
				for i, r := range sel.Chosen.Allocations[0].Devices.Results {
					if i > 0 {
						got += ","
					}
					got += r.Device
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q (%s)", got, tc.want, sel.Summary())
			}
		})
	}
}
