package allocator

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

func newTestAllocator() *Allocator {
	return New(Options{Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "share" }})
}

// TestAllocateRules has one or more cases per allocation rule. Every
// successful result also passes the independent checker.
func TestAllocateRules(t *testing.T) {
	n1 := mkNode("n1", "zone=a")
	gpu := mkClass("gpu")
	modelA := mkClass("model-a", "model=a")
	ab := []resourceapi.Device{mkDev("d0", attr("model", "b")), mkDev("d1", attr("model", "a"))}
	tests := []struct {
		name   string
		in     instance
		want   [][]string // nil: doesn't fit
		reason Reason     // of the first request explanation when it doesn't fit
	}{
		{
			name: "one device",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d0"}},
		},
		{
			name:   "devices of another node are not visible",
			in:     instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n2", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason: ReasonNoDevices,
		},
		{
			name: "allNodes pool",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "", devs("d0"), allNodes())}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d0"}},
		},
		{
			name: "node selector pool matches labels",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "", devs("d0"), labelSelector("zone", "b")), mkSlice("q", "", devs("d0"), labelSelector("zone", "a"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:q/d0"}},
		},
		{
			name: "per-device node selection",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "", []resourceapi.Device{mkDev("d0", devNode("n2")), mkDev("d1", devNode("n1"))}, perDevice())},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d1"}},
		},
		{
			name: "only the highest generation counts",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n1", devs("old"), generation(1, 1)), mkSlice("p", "n1", devs("new"), generation(2, 1))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/new"}},
		},
		{
			name: "incomplete pool is skipped, other pool used",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n1", devs("d0"), generation(1, 2)), mkSlice("q", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:q/d0"}},
		},
		{
			name: "incomplete pool of another node does not matter",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n2", devs("d0"), generation(1, 2)), mkSlice("q", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, allMode()))}},
			want: [][]string{{"r:q/d0"}},
		},
		{
			name: "pool with more slices than it announces is not used",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n1", devs("d0"), named("p-a")), mkSlice("p", "n1", devs("d1"), named("p-b"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason: ReasonPoolUnusable,
		},
		{
			name: "pool with more slices than it announces is skipped, other pool used",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n1", devs("d0"), named("p-a")), mkSlice("p", "n1", devs("d1"), named("p-b")), mkSlice("q", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:q/d0"}},
		},
		{
			name: "an older generation with too many slices does not matter",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n1", devs("d0"), named("p-a")), mkSlice("p", "n1", devs("d1"), named("p-b")), mkSlice("p", "n1", devs("d2"), generation(2, 1))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d2"}},
		},
		{
			name: "invalid pool (duplicate device) is skipped",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{
				mkSlice("p", "n1", devs("d0", "d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason: ReasonPoolUnusable,
		},
		{
			name:   "class selector",
			in:     instance{classes: classes(modelA), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "model-a", 1))}},
			want:   [][]string{{"r:p/d1"}},
			reason: "",
		},
		{
			name: "request selector",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector("model=b")))}},
			want: [][]string{{"r:p/d0"}},
		},
		{
			name:   "selector runtime error means no match",
			in:     instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 2, selector("errorif:model=b")))}},
			reason: ReasonSelectorError,
		},
		{
			name: "exact count",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1", "d2"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 2))}},
			want: [][]string{{"r:p/d0", "r:p/d1"}},
		},
		{
			name: "all devices",
			in:   instance{classes: classes(modelA), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", append(slices.Clone(ab), mkDev("d2", attr("model", "a"))))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "model-a", 0, allMode()))}},
			want: [][]string{{"r:p/d1", "r:p/d2"}},
		},
		{
			name:   "all devices fails if one is allocated",
			in:     instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))}, prior: used("p/d1"), claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			reason: ReasonAllocated,
		},
		{
			name: "all devices fails while a pool on the node is incomplete",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0")), mkSlice("q", "n1", devs("d0"), generation(3, 2))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			reason: ReasonPoolUnusable,
		},
		{
			name:   "all devices fails when the node has more than an allocation holds",
			in:     instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs(numbered("d", 33)...))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			reason: ReasonTooManyResults,
		},
		{
			name: "all devices up to the limit",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs(numbered("d", 32)...))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			want: [][]string{prefixed("r:p/", numbered("d", 32))},
		},
		{
			name:   "all devices needs at least one",
			in:     instance{classes: classes(modelA), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "model-a", 0, allMode()))}},
			reason: ReasonClassMismatch,
		},
		{
			name: "allocated devices are skipped",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))}, prior: used("p/d0"), claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d1"}},
		},
		{
			name: "admin access may use allocated devices",
			in:   instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, prior: used("p/d0"), claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, admin()))}},
			want: [][]string{{"r:p/d0"}},
		},
		{
			name: "a device is not used twice by one pod",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c0", mkReq("r", "gpu", 1)), mkClaim("c1", mkReq("r", "gpu", 1))}},
			reason: ReasonConflict,
		},
		{
			name: "first available falls back to the second subrequest",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", firstAvailable("r", sub("big", "gpu", 3), sub("small", "gpu", 1, "model=a")))}},
			want: [][]string{{"r/small:p/d1"}},
		},
		{
			name: "first available prefers the first subrequest",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", firstAvailable("r", sub("two", "gpu", 2), sub("one", "gpu", 1)))}},
			want: [][]string{{"r/two:p/d0", "r/two:p/d1"}},
		},
		{
			name: "matchAttribute",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("d0", attr("model", "a")), mkDev("d1", attr("model", "b")), mkDev("d2", attr("model", "b"))})},
				claims: []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r0", "gpu", 1), mkReq("r1", "gpu", 1)), true, "drv/model")}},
			want: [][]string{{"r0:p/d1", "r1:p/d2"}},
		},
		{
			name: "matchAttribute only for the named requests",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("d0", attr("model", "a")), mkDev("d1", attr("model", "b")), mkDev("d2", attr("model", "b"))})},
				claims: []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r0", "gpu", 1), mkReq("r1", "gpu", 2)), true, "drv/model", "r1")}},
			want: [][]string{{"r0:p/d0", "r1:p/d1", "r1:p/d2"}},
		},
		{
			name: "matchAttribute unsatisfiable",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", ab)},
				claims: []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r", "gpu", 2)), true, "drv/model")}},
			reason: ReasonConstraint,
		},
		{
			name: "distinctAttribute",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("d0", intAttr("numa", 0)), mkDev("d1", intAttr("numa", 0)), mkDev("d2", intAttr("numa", 1))})},
				claims: []*resourceapi.ResourceClaim{withConstraint(mkClaim("c", mkReq("r", "gpu", 2)), false, "drv/numa")}},
			want: [][]string{{"r:p/d0", "r:p/d2"}},
		},
		{
			name: "tainted device skipped",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("d0", taint("k", "v", resourceapi.DeviceTaintEffectNoSchedule)), mkDev("d1", taint("k", "v", resourceapi.DeviceTaintEffectNone))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d1"}},
		},
		{
			name: "NoExecute taint not tolerated",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("d0", taint("k", "v", resourceapi.DeviceTaintEffectNoExecute))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, tolerate("k", resourceapi.DeviceTolerationOpEqual, "w")))}},
			reason: ReasonTaint,
		},
		{
			name: "tolerated taint",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("d0", taint("k", "v", resourceapi.DeviceTaintEffectNoExecute))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, tolerate("k", resourceapi.DeviceTolerationOpExists, "")))}},
			want: [][]string{{"r:p/d0"}},
		},
		{
			name: "taint from a DeviceTaintRule",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))},
				rules: []*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
					DeviceSelector: &resourceapi.DeviceTaintSelector{Device: new("d0")},
					Taint:          resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d1"}},
		},
		{
			name: "DeviceTaintRule without a selector matches no device",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))},
				rules: []*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
					Taint: resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			want: [][]string{{"r:p/d0"}},
		},
		{
			name: "DeviceTaintRule with an empty selector matches every device",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0", "d1"))},
				rules: []*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
					DeviceSelector: &resourceapi.DeviceTaintSelector{},
					Taint:          resourceapi.DeviceTaint{Key: "broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason: ReasonTaint,
		},
		{
			name: "partitions share counters",
			in: instance{classes: classes(gpu), slices: split(mkSlice("p", "n1", []resourceapi.Device{
				mkDev("whole", consumes("gpu0", "mem", 8)), mkDev("half0", consumes("gpu0", "mem", 4)), mkDev("half1", consumes("gpu0", "mem", 4))},
				counterSet("gpu0", map[string]int64{"mem": 8}))),
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 2))}},
			want: [][]string{{"r:p/half0", "r:p/half1"}},
		},
		{
			name: "all partitions while one is allocated",
			in: instance{classes: classes(gpu), slices: split(mkSlice("p", "n1", []resourceapi.Device{
				mkDev("whole", consumes("gpu0", "mem", 8)), mkDev("half0", consumes("gpu0", "mem", 4))},
				counterSet("gpu0", map[string]int64{"mem": 8}))),
				prior:  used("p/half0"),
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 0, allMode()))}},
			reason: ReasonAllocated,
		},
		{
			name: "counters exhausted",
			in: instance{classes: classes(gpu), slices: split(mkSlice("p", "n1", []resourceapi.Device{
				mkDev("whole", consumes("gpu0", "mem", 8)), mkDev("half0", consumes("gpu0", "mem", 4))},
				counterSet("gpu0", map[string]int64{"mem": 8}))),
				prior:  used("p/half0"),
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1))}},
			reason: ReasonCounters,
		},
		{
			name: "shared device with capacity",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("nic", shared("bw", 10, nil))})},
				prior:  used("p/nic=bw:4"),
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "gpu", 1, capacityReq("bw", 3)), mkReq("r1", "gpu", 1, capacityReq("bw", 3)))}},
			want: [][]string{{"r0:p/nic", "r1:p/nic"}},
		},
		{
			name: "capacity names must match exactly",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("nic", shared("bw", 10, nil))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "gpu", 1, capacityReq("drv/bw", 3)))}},
			reason: ReasonCapacity,
		},
		{
			name: "shared device capacity exhausted",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("nic", shared("bw", 10, nil))})},
				prior:  used("p/nic=bw:8"),
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "gpu", 1, capacityReq("bw", 3)))}},
			reason: ReasonCapacity,
		},
		{
			name: "capacity request rounded up by policy",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", []resourceapi.Device{
				mkDev("nic", shared("bw", 10, &resourceapi.CapacityRequestPolicy{Default: new(qty(2)),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: new(qty(2)), Step: new(qty(4))}}))})},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r0", "gpu", 1, capacityReq("bw", 3)), mkReq("r1", "gpu", 1, capacityReq("bw", 3)))}},
			// 3 rounds to 6, two of them don't fit into 10.
			reason: ReasonConflict,
		},
		{
			name: "more than 32 results",
			in: instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))},
				claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 33))}},
			reason: ReasonTooManyResults,
		},
		{
			name:   "unknown class",
			in:     instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "nope", 1))}},
			reason: ReasonClassNotFound,
		},
		{
			name:   "selector does not compile",
			in:     instance{classes: classes(gpu), slices: []*resourceapi.ResourceSlice{mkSlice("p", "n1", devs("d0"))}, claims: []*resourceapi.ResourceClaim{mkClaim("c", mkReq("r", "gpu", 1, selector("invalid")))}},
			reason: ReasonSelectorInvalid,
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
			if tc.want == nil {
				if res.Fits() {
					t.Fatalf("fits with %v, want failure %s", picked(res), tc.reason)
				}
				if got := res.Explanation.Requests[0].Reason; got != tc.reason {
					t.Errorf("reason %s, want %s: %s", got, tc.reason, res.Explanation.Summary())
				}
				if want := oracleFeasible(&in); want {
					t.Errorf("oracle finds a solution")
				}
				return
			}
			if !res.Fits() {
				t.Fatalf("does not fit: %s", res.Explanation.Summary())
			}
			if got := picked(res); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
