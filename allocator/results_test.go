package allocator

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

func opaque(text string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: testDriver, Parameters: runtime.RawExtension{Raw: []byte(`"` + text + `"`)}}}
}

func TestAllocationResultContent(t *testing.T) {
	n1 := mkNode("n1", "zone=a")
	gpu := mkClass("gpu")
	gpu.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaque("class-1")}, {DeviceConfiguration: opaque("class-2")}}
	nic := mkClass("nic")
	nic.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaque("nic")}}
	onNode := []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}
	zoneA := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}

	tests := []struct {
		name  string
		in    instance
		check func(t *testing.T, ar *resourceapi.AllocationResult)
	}{
		{
			name: "config from classes, then from the claim, in order",
			in: func() instance {
				c := mkClaim("c", mkReq("g0", "gpu", 1), mkReq("n", "nic", 1), mkReq("g1", "gpu", 1))
				c.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{
					{Requests: []string{"n"}, DeviceConfiguration: opaque("claim-n")},
					{DeviceConfiguration: opaque("claim-all")},
					{Requests: []string{"other"}, DeviceConfiguration: opaque("claim-none")},
				}
				return instance{classes: classes(gpu, nic), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1", "d2"))}, claims: []*resourceapi.ResourceClaim{c}}
			}(),
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				want := []resourceapi.DeviceAllocationConfiguration{
					{Source: resourceapi.AllocationConfigSourceClass, Requests: []string{"g0", "g1"}, DeviceConfiguration: opaque("class-1")},
					{Source: resourceapi.AllocationConfigSourceClass, Requests: []string{"g0", "g1"}, DeviceConfiguration: opaque("class-2")},
					{Source: resourceapi.AllocationConfigSourceClass, Requests: []string{"n"}, DeviceConfiguration: opaque("nic")},
					{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"n"}, DeviceConfiguration: opaque("claim-n")},
					{Source: resourceapi.AllocationConfigSourceClaim, DeviceConfiguration: opaque("claim-all")},
				}
				if !reflect.DeepEqual(ar.Devices.Config, want) {
					t.Errorf("config\n got %+v\nwant %+v", ar.Devices.Config, want)
				}
			},
		},
		{
			name: "class config applying to every request names none",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				if len(ar.Devices.Config) != 2 || ar.Devices.Config[0].Requests != nil {
					t.Errorf("config %+v", ar.Devices.Config)
				}
			},
		},
		{
			name: "node-local device pins the node",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				if ar.NodeSelector == nil || !reflect.DeepEqual(ar.NodeSelector.NodeSelectorTerms, onNode) {
					t.Errorf("node selector %+v", ar.NodeSelector)
				}
			},
		},
		{
			name: "network device available everywhere has no node selector",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "", devs("d0"), allNodes())}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				if ar.NodeSelector != nil {
					t.Errorf("node selector %+v", ar.NodeSelector)
				}
			},
		},
		{
			name: "pool node selector is copied",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "", devs("d0"), labelSelector("zone", "a"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				if ar.NodeSelector == nil || !reflect.DeepEqual(ar.NodeSelector.NodeSelectorTerms, zoneA) {
					t.Errorf("node selector %+v", ar.NodeSelector)
				}
			},
		},
		{
			name: "binding conditions copied, bindsToNode pins the node",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "", []resourceapi.Device{
				func() resourceapi.Device {
					d := mkDev("d0", bindingConditions("attached"), bindsToNode())
					d.BindingFailureConditions = []string{"failed"}
					return d
				}()}, allNodes())},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				r := ar.Devices.Results[0]
				if !reflect.DeepEqual(r.BindingConditions, []string{"attached"}) || !reflect.DeepEqual(r.BindingFailureConditions, []string{"failed"}) {
					t.Errorf("binding conditions %v %v", r.BindingConditions, r.BindingFailureConditions)
				}
				if ar.NodeSelector == nil || !reflect.DeepEqual(ar.NodeSelector.NodeSelectorTerms, onNode) {
					t.Errorf("node selector %+v", ar.NodeSelector)
				}
			},
		},
		{
			name: "tolerations and admin access copied",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, admin(), tolerate("k", resourceapi.DeviceTolerationOpExists, "")))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				r := ar.Devices.Results[0]
				if !deref(r.AdminAccess) || len(r.Tolerations) != 1 || r.Tolerations[0].Key != "k" {
					t.Errorf("result %+v", r)
				}
			},
		},
		{
			name: "share ID and consumed capacity for shared devices",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("nic", shared("bw", 10, &resourceapi.CapacityRequestPolicy{Default: new(qty(1)), ValidValues: []resource.Quantity{qty(1), qty(4), qty(8)}}))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "gpu", 1, capacityReq("bw", 3)), mkReq("r1", "gpu", 1))}},
			check: func(t *testing.T, ar *resourceapi.AllocationResult) {
				r0, r1 := ar.Devices.Results[0], ar.Devices.Results[1]
				if r0.ShareID == nil || *r0.ShareID != "share" || r1.ShareID == nil {
					t.Errorf("share IDs %v %v", r0.ShareID, r1.ShareID)
				}
				got0, got1 := r0.ConsumedCapacity["bw"], r1.ConsumedCapacity["bw"]
				if got0.Value() != 4 || got1.Value() != 1 {
					t.Errorf("consumed %v and %v, want 4 (3 rounded up) and 1 (default)", r0.ConsumedCapacity, r1.ConsumedCapacity)
				}
			},
		},
	}
	a := newTestAllocator()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.node = n1
			res, err := runChecked(context.Background(), a, &in)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Fits() {
				t.Fatal(res.Explanation.Summary())
			}
			tc.check(t, res.Allocations[0])
		})
	}
}

func TestInUseIncremental(t *testing.T) {
	n1 := mkNode("n1")
	in := instance{classes: classes(mkClass("gpu")), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{mkDev("d0"), mkDev("nic", shared("bw", 10, nil))})}, node: n1}
	a := newTestAllocator()
	inv := a.Prepare(in.snapshot())
	claims := []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector("!model=x")), mkReq("n", "gpu", 1, capacityReq("bw", 6)))}
	u := NewInUse()
	res, err := a.Allocate(context.Background(), inv.State(u), claims, n1)
	if err != nil || !res.Fits() {
		t.Fatalf("first allocation: %v %s", err, res.Explanation.Summary())
	}
	// The controller records its own allocation before the informer sees it.
	u.AddAllocation(res.Allocations[0])
	if !u.Allocated(DeviceID{testDriver, "p", "d0"}) {
		t.Fatal("d0 not recorded as allocated")
	}
	snapshot := u.Clone()
	res2, err := a.Allocate(context.Background(), inv.State(u), claims, n1)
	if err != nil || res2.Fits() {
		t.Fatalf("second allocation should not fit: %v %v", err, picked(res2))
	}
	u.RemoveAllocation(res.Allocations[0])
	res3, err := a.Allocate(context.Background(), inv.State(u), claims, n1)
	if err != nil || !res3.Fits() {
		t.Fatalf("after deallocation: %v %s", err, res3.Explanation.Summary())
	}
	if !snapshot.Allocated(DeviceID{testDriver, "p", "d0"}) {
		t.Error("clone changed with the original")
	}
	// Claims with allocations feed the accounting directly.
	claim := claims[0].DeepCopy()
	claim.Status.Allocation = res3.Allocations[0]
	u2 := NewInUse()
	u2.AddClaim(claim)
	u2.AddClaim(mkClaim("unallocated"))
	if !u2.Allocated(DeviceID{testDriver, "p", "d0"}) {
		t.Error("AddClaim did not record d0")
	}

	// Recording a claim by UID twice (own allocation, then the informer's
	// copy) counts it once; the shared capacity is not doubled.
	claim.UID = "uid-1"
	u3 := NewInUse()
	u3.SetClaim(claim.UID, res3.Allocations[0])
	u3.AddClaim(claim)
	st := inv.State(u3)
	nic := inv.byID[DeviceID{testDriver, "p", "nic"}]
	if got := st.capUsed[nic.index]; len(got) != 1 || got[0] != 6000 {
		t.Errorf("capacity used %v, want [6000]", got)
	}
	claim.Status.Allocation = nil
	u3.AddClaim(claim)
	if u3.Allocated(DeviceID{testDriver, "p", "d0"}) || len(u3.shared) != 0 {
		t.Error("deallocated claim still recorded")
	}
}

func TestSelectNode(t *testing.T) {
	gpu := mkClass("gpu")
	var slices []*resourceapi.ResourceSlice
	var nodes []*corev1.Node
	for _, n := range []string{"n3", "n1", "n2", "n4"} {
		nodes = append(nodes, mkNode(n))
		slices = append(slices, mkSlice("p-"+n, n, devs("d0", "d1", "d2", "d3")))
	}
	// n1 has 2 devices in use, n2 one, n3 and n4 none; n4's are all tainted.
	prior := used("p-n1/d0", "p-n1/d1", "p-n2/d0")
	for i := range slices[3].Spec.Devices {
		slices[3].Spec.Devices[i].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
	claims := []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}
	for _, tc := range []struct {
		policy Policy
		want   string
	}{
		{MostAllocated, "n1"},
		{LeastAllocated, "n3"},
	} {
		a := New(Options{Policy: tc.policy, Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "x" }})
		inv := a.Prepare(Snapshot{Classes: classes(gpu), Slices: slices})
		u := NewInUse()
		for _, p := range prior {
			u.AddAllocation(p)
		}
		sel, err := a.SelectNode(context.Background(), inv.State(u), claims, nodes)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Chosen == nil || sel.Chosen.Node != tc.want {
			t.Errorf("policy %v: chose %+v, want %s", tc.policy, sel.Chosen, tc.want)
		}
		if len(sel.Rejected) != 1 || sel.Rejected[0].Node != "n4" {
			t.Errorf("rejected %+v", sel.Rejected)
		}
		// Input order does not matter.
		reversed := []*corev1.Node{nodes[3], nodes[2], nodes[1], nodes[0]}
		sel2, _ := a.SelectNode(context.Background(), inv.State(u), claims, reversed)
		if sel2.Chosen == nil || sel2.Chosen.Node != sel.Chosen.Node {
			t.Errorf("order dependent: %v vs %v", sel2.Chosen, sel.Chosen)
		}
	}

	// Ties go to the first name; none fitting gives a grouped summary.
	a := newTestAllocator()
	inv := a.Prepare(Snapshot{Classes: classes(gpu), Slices: slices})
	sel, _ := a.SelectNode(context.Background(), inv.State(nil), claims, nodes[:3])
	if sel.Chosen == nil || sel.Chosen.Node != "n1" {
		t.Errorf("tie: chose %+v, want n1", sel.Chosen)
	}
	big := []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 5))}
	sel, _ = a.SelectNode(context.Background(), inv.State(nil), big, nodes)
	if sel.Chosen != nil {
		t.Fatalf("chose %s", sel.Chosen.Node)
	}
	want := "0/4 nodes fit: 4 r: NoDevices; first: node n3: claim ns/c request r: needs 5 devices of class gpu, but the node has only 4 usable devices"
	if got := sel.Summary(); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
}

func TestPackingWithinNode(t *testing.T) {
	// Two GPUs, each with two halves. One half of gpu1 is in use: a new
	// half should come from gpu1, keeping gpu0 whole.
	gpu := mkClass("gpu")
	devices := []resourceapi.Device{
		mkDev("gpu0-a", consumes("gpu0", "mem", 4)), mkDev("gpu0-b", consumes("gpu0", "mem", 4)),
		mkDev("gpu1-a", consumes("gpu1", "mem", 4)), mkDev("gpu1-b", consumes("gpu1", "mem", 4)),
	}
	in := instance{classes: classes(gpu), node: mkNode("n1"),
		slices: split(mkSlice("p", "n1", devices, counterSet("gpu0", map[string]int64{"mem": 8}), counterSet("gpu1", map[string]int64{"mem": 8}))),
		prior:  used("p/gpu1-a"),
		claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}}
	res, err := runChecked(context.Background(), newTestAllocator(), &in)
	if err != nil || !res.Fits() {
		t.Fatalf("%v %s", err, res.Explanation.Summary())
	}
	if got := res.Allocations[0].Devices.Results[0].Device; got != "gpu1-b" {
		t.Errorf("picked %s, want gpu1-b", got)
	}

	// On an unused GPU, a request any size satisfies gets a half, not the
	// whole GPU.
	in.slices = split(mkSlice("p", "n1", []resourceapi.Device{
		mkDev("gpu0", consumes("gpu0", "mem", 8)), mkDev("gpu0-a", consumes("gpu0", "mem", 4)), mkDev("gpu0-b", consumes("gpu0", "mem", 4)),
	}, counterSet("gpu0", map[string]int64{"mem": 8})))
	in.prior = nil
	res, err = runChecked(context.Background(), newTestAllocator(), &in)
	if err != nil || !res.Fits() {
		t.Fatalf("%v %s", err, res.Explanation.Summary())
	}
	if got := res.Allocations[0].Devices.Results[0].Device; got != "gpu0-a" {
		t.Errorf("picked %s, want gpu0-a", got)
	}
}

// TestCELSelectors runs the default compiler, the environment of package cel.
func TestCELSelectors(t *testing.T) {
	var numbers []string
	for i := 0; i < 100; i++ {
		numbers = append(numbers, fmt.Sprint(i))
	}
	hundred := "[" + strings.Join(numbers, ",") + "]"
	a := New(Options{})
	cls := mkClass("gpu", `device.driver == "drv"`)
	in := instance{classes: classes(cls), node: mkNode("n1"),
		slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
			mkDev("d0", attr("model", "b"), intAttr("mem", 8)), mkDev("d1", attr("model", "a"), intAttr("mem", 16)), mkDev("d2", attr("model", "a"))})}}
	for _, tc := range []struct {
		expr   string
		want   string
		reason Reason
	}{
		{expr: `device.attributes["drv"].model == "a" && device.attributes["drv"].mem >= 16`, want: "d1"},
		{expr: `device.attributes["drv"].model == "c"`, reason: ReasonSelectorMismatch},
		// d2 has no mem attribute: evaluation fails there, d0 does not match.
		{expr: `device.attributes["drv"].mem > 100`, reason: ReasonSelectorError},
		{expr: `device.attributes[`, reason: ReasonSelectorInvalid},
		// A million iterations exceed the runtime cost limit.
		{expr: hundred + `.all(i, ` + hundred + `.all(j, ` + hundred + `.all(k, device.driver == "drv")))`, reason: ReasonSelectorError},
	} {
		in.claims = []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector(tc.expr)))}
		inv := a.Prepare(in.snapshot())
		res, err := a.Allocate(context.Background(), inv.State(nil), in.claims, in.node)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want != "" {
			if !res.Fits() || res.Allocations[0].Devices.Results[0].Device != tc.want {
				t.Errorf("%s: got %v %s, want %s", tc.expr, picked(res), res.Explanation.Summary(), tc.want)
			}
			continue
		}
		if res.Fits() {
			t.Errorf("%s: fits with %v", tc.expr, picked(res))
			continue
		}
		if got := res.Explanation.Requests[0].Reason; got != tc.reason {
			t.Errorf("%s: reason %s, want %s (%s)", tc.expr, got, tc.reason, res.Explanation.Summary())
		}
		t.Logf("%.60s: %s", tc.expr, res.Explanation.Summary())
	}
}

// TestConcurrentUse runs node selection from several goroutines on one
// inventory and state; all must agree (run with -race to check locking).
func TestConcurrentUse(t *testing.T) {
	w := partitionableWorkload(50)
	a := New(Options{Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "x" }})
	inv := a.Prepare(Snapshot{Classes: classes(mkClass("gpu", "size=quarter")), Slices: w.slices})
	st := inv.State(w.inUse)
	claims := []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r", "gpu", 2)), true, benchDriver+"/size")}
	chosen := make(chan string, 8)
	for i := 0; i < cap(chosen); i++ {
		go func() {
			sel, err := a.SelectNode(context.Background(), st, claims, w.nodes)
			switch {
			case err != nil:
				chosen <- err.Error()
			case sel.Chosen == nil:
				chosen <- sel.Summary()
			default:
				chosen <- sel.Chosen.Node + fmt.Sprint(picked(*sel.Chosen))
			}
		}()
	}
	first := <-chosen
	for i := 1; i < cap(chosen); i++ {
		if got := <-chosen; got != first {
			t.Errorf("goroutines disagree: %s vs %s", got, first)
		}
	}
	t.Log(first)
}

// TestStateAddAllocation checks that adding allocations to a state gives
// the same state as building it from accounting that holds them.
func TestStateAddAllocation(t *testing.T) {
	a := newTestAllocator()
	for seed := uint64(0); seed < 2000; seed++ {
		in := randomInstance(seed)
		inv := a.Prepare(in.snapshot())
		want := inv.State(in.inUse())
		got := inv.State(nil)
		for _, p := range in.prior {
			got.AddAllocation(p)
		}
		if !reflect.DeepEqual(got.busy, want.busy) || !reflect.DeepEqual(got.shared, want.shared) ||
			!reflect.DeepEqual(got.counterFree, want.counterFree) || !reflect.DeepEqual(got.capUsed, want.capUsed) ||
			!reflect.DeepEqual(got.nodeBusy, want.nodeBusy) || !reflect.DeepEqual(got.nodeUsed, want.nodeUsed) {
			t.Fatalf("seed %d: state differs\n got %+v\nwant %+v", seed, *got, *want)
		}
	}
}
