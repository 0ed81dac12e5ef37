package allocator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestExplanations shows the reason and summary for every kind of failure.
func TestExplanations(t *testing.T) {
	n1 := mkNode("n1")
	gpu := mkClass("gpu")
	modelA := mkClass("model-a", "model=a")
	many := make([]resourceapi.Device, 40)
	for i := range many {
		many[i] = mkDev(fmt.Sprintf("d%02d", i))
	}
	ab := []resourceapi.Device{mkDev("d0", attr("model", "b")), mkDev("d1", attr("model", "a"))}
	// 20 devices of model a and 20 of model b.
	mixed := make([]resourceapi.Device, 40)
	for i := range mixed {
		mixed[i] = mkDev(fmt.Sprintf("d%02d", i), attr("model", []string{"a", "b"}[i%2]))
	}
	modelB := mkClass("model-b", "model=b")
	tests := []struct {
		name    string
		in      instance
		reason  Reason
		summary string // substring of the summary
	}{
		{
			name:    "no device on the node",
			in:      instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n2", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonNoDevices,
			summary: "node n1: claim ns/c request r: needs one device of class gpu, but the node has only 0 usable devices",
		},
		{
			name:    "no device of the class",
			in:      instance{classes: classes(modelA), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "model-a", 1))}},
			reason:  ReasonClassMismatch,
			summary: `only 0 of 2 devices on the node match the class (selector "model=a" rejected 2)`,
		},
		{
			name:    "selector rejects the class's devices",
			in:      instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector("model=c")))}},
			reason:  ReasonSelectorMismatch,
			summary: `2 devices match class gpu but selector "model=c" rejected 2 of them`,
		},
		{
			name:    "selector fails at runtime",
			in:      instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector("error")))}},
			reason:  ReasonSelectorError,
			summary: "evaluation failed on 2 devices: device drv/p/d0: no such key: model",
		},
		{
			name:    "all matching devices allocated",
			in:      instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))}, prior: used("p/d0", "p/d1"), claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonAllocated,
			summary: "2 devices match but 2 of them are already allocated",
		},
		{
			name: "constraint unsatisfiable",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)},
				claims: []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r0", "gpu", 1), mkReq("r1", "gpu", 1)), true, "drv/model")}},
			reason:  ReasonConstraint,
			summary: "constraint #0 (matchAttribute drv/model) cannot be satisfied by the candidate devices",
		},
		{
			name: "taint not tolerated",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{mkDev("d0", taint("maintenance", "true", resourceapi.DeviceTaintEffectNoSchedule))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonTaint,
			summary: "1 devices match but 1 are tainted (taint maintenance=true:NoSchedule not tolerated)",
		},
		{
			name: "pool incomplete",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"), generation(1, 2))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonPoolUnusable,
			summary: "but the node has only 0 usable devices; pool drv/p is incomplete: 1 of the 2 ResourceSlices of generation 1 are visible",
		},
		{
			name: "pool with more slices than it announces",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"), named("p-a")), mkSlice("p", "n1", devs("d1"), named("p-b"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonPoolUnusable,
			summary: "but the node has only 0 usable devices; pool drv/p is incomplete: 2 ResourceSlices of generation 1 are visible but the pool announces resourceSliceCount 1",
		},
		{
			name: "pool incomplete with all devices",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"), generation(1, 2)), mkSlice("q", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			reason:  ReasonPoolUnusable,
			summary: "asks for all devices, but pool drv/p is incomplete",
		},
		{
			name: "pool invalid",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonPoolUnusable,
			summary: `pool drv/p is invalid: device "d0" listed twice`,
		},
		{
			name: "shared counters used up",
			in: instance{classes: classes(gpu), slices: split(mkSlice("p", "n1", []resourceapi.Device{
				mkDev("whole", consumes("gpu0", "mem", 8)), mkDev("half0", consumes("gpu0", "mem", 4))}, counterSet("gpu0", map[string]int64{"mem": 8}))),
				prior: used("p/half0"), claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason:  ReasonCounters,
			summary: "the shared counters (drv/p/gpu0/mem) of 1 of them are used up by other partitions",
		},
		{
			name: "capacity used up",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{mkDev("nic", shared("bw", 10, nil))})},
				prior: used("p/nic=bw:8"), claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, capacityReq("bw", 3)))}},
			reason:  ReasonCapacity,
			summary: "1 devices match but only 0 have enough capacity left",
		},
		{
			name: "requests compete",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c0", mkReq("r", "gpu", 2)), mkClaim("c1", mkReq("r", "gpu", 1))}},
			reason:  ReasonConflict,
			summary: "not enough remain once the other requests are allocated",
		},
		{
			name:    "class missing",
			in:      instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "tpu", 1))}},
			reason:  ReasonClassNotFound,
			summary: `device class "tpu" does not exist`,
		},
		{
			name: "too many results",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", many)},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "gpu", 20), mkReq("r1", "gpu", 20))}},
			reason:  ReasonTooManyResults,
			summary: "claim needs at least 40 devices, at most 32 can be allocated per claim",
		},
		{
			name: "all devices are more than an allocation holds",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", many)},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			reason:  ReasonTooManyResults,
			summary: "claim ns/c request r: allocationMode All needs all 40 matching devices, but an allocation holds at most 32",
		},
		{
			name: "all devices and another request are more than an allocation holds",
			in: instance{classes: classes(modelA, modelB), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", mixed)},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "model-a", 0, allMode()), mkReq("r1", "model-b", 13))}},
			reason:  ReasonTooManyResults,
			summary: "claim ns/c: claim needs at least 33 devices on the node, but an allocation holds at most 32 (allocationMode All r0: 20)",
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
			if res.Fits() {
				t.Fatalf("fits: %v", picked(res))
			}
			summary := res.Explanation.Summary()
			t.Logf("%s: %s", res.Explanation.Requests[0].Reason, summary)
			if got := res.Explanation.Requests[0].Reason; got != tc.reason {
				t.Errorf("reason %s, want %s", got, tc.reason)
			}
			if !strings.Contains(summary, tc.summary) {
				t.Errorf("summary %q does not contain %q", summary, tc.summary)
			}
		})
	}
}
