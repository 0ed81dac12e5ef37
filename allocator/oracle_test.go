package allocator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// oracleFeasible searches exhaustively: every alternative of every
// request, every set of devices that pass the per-device rules, each
// complete assignment validated by the checker.
func oracleFeasible(in *instance) bool {
	w := newRefWorld(in)
	type group struct {
		claim int
		alts  []refSlot
	}
	var groups []group
	for ci, c := range in.claims {
		for ri := range c.Spec.Devices.Requests {
			groups = append(groups, group{claim: ci, alts: refSlots(&c.Spec.Devices.Requests[ri])})
		}
	}
	allocs := make([]*resourceapi.AllocationResult, len(in.claims))
	for i := range allocs {
		allocs[i] = &resourceapi.AllocationResult{}
	}
	shareID := types.UID("share")
	result := func(sl refSlot, rd *refDevice) resourceapi.DeviceRequestAllocationResult {
		r := resourceapi.DeviceRequestAllocationResult{Request: sl.name, Driver: rd.id.driver, Pool: rd.id.pool, Device: rd.id.device,
			Tolerations: sl.tolerations, BindingConditions: rd.dev.BindingConditions, BindingFailureConditions: rd.dev.BindingFailureConditions}
		if sl.admin {
			r.AdminAccess = new(true)
		}
		if isMulti(rd) {
			r.ShareID = &shareID
			use, _ := consumption(sl, rd)
			if len(use) > 0 {
				r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{}
				for name, v := range use {
					r.ConsumedCapacity[resourceapi.QualifiedName(name)] = *resource.NewMilliQuantity(v, resource.DecimalSI)
				}
			}
		}
		return r
	}
	var rec func(gi int) bool
	rec = func(gi int) bool {
		if gi == len(groups) {
			return w.check(allocs) == nil
		}
		g := groups[gi]
		ar := allocs[g.claim]
		base := len(ar.Devices.Results)
		for _, sl := range g.alts {
			if sl.all {
				ids := w.allSet(sl)
				if len(ids) == 0 {
					continue
				}
				for _, id := range ids {
					ar.Devices.Results = append(ar.Devices.Results, result(sl, w.devices[id]))
				}
				if rec(gi + 1) {
					return true
				}
				ar.Devices.Results = ar.Devices.Results[:base]
				continue
			}
			var cands []*refDevice
			for _, id := range w.order {
				rd := w.devices[id]
				if _, ok := consumption(sl, rd); ok && rd.usable && rd.reachable && w.selects(sl, rd) && w.tolerated(sl, rd) {
					cands = append(cands, rd)
				}
			}
			var choose func(start, n int) bool
			choose = func(start, n int) bool {
				if n == sl.count {
					return rec(gi + 1)
				}
				// Stop where too few candidates remain to reach the count.
				for i := start; i < len(cands) && len(cands)-i >= sl.count-n; i++ {
					ar.Devices.Results = append(ar.Devices.Results, result(sl, cands[i]))
					if choose(i+1, n+1) {
						return true
					}
					ar.Devices.Results = ar.Devices.Results[:len(ar.Devices.Results)-1]
				}
				return false
			}
			if choose(0, 0) {
				return true
			}
		}
		return false
	}
	return rec(0)
}

// randomInstance builds a small random allocation problem from a seed.
func randomInstance(seed uint64) *instance {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	chance := func(p float64) bool { return r.Float64() < p }
	q := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
	const driver = "drv"
	in := &instance{
		node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "z1"}}},
		classes: map[string]*resourceapi.DeviceClass{
			// The devices of the big pool are for the "big" class only, so
			// that the brute force stays small.
			"any": {ObjectMeta: metav1.ObjectMeta{Name: "any"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "!model=big"}}}}},
			"a":   {ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "model=a"}}}}},
			"err": {ObjectMeta: metav1.ObjectMeta{Name: "err"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "errorif:model=b"}}, {CEL: &resourceapi.CELDeviceSelector{Expression: "!model=big"}}}}},
			"big": {ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "model=big"}}}}},
		},
	}
	classNames := []string{"any", "any", "any", "any", "a", "err"}
	numPools := 1 + r.IntN(3)
	var allDevices []DeviceID
	for p := 0; p < numPools; p++ {
		poolName := fmt.Sprintf("p%d", p)
		spec := resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: poolName, Generation: 1, ResourceSliceCount: 1}}
		switch x := r.IntN(10); {
		case x < 5:
			spec.NodeName = new("n1")
		case x < 6:
			spec.NodeName = new("n2")
		case x < 7:
			spec.AllNodes = new(true)
		case x < 8:
			spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}
		default:
			spec.PerDeviceNodeSelection = new(true)
		}
		if chance(0.08) {
			spec.Pool.ResourceSliceCount = 2 // incomplete
		}
		counters := chance(0.3)
		if counters {
			spec.SharedCounters = []resourceapi.CounterSet{{Name: "gpu", Counters: map[string]resourceapi.Counter{"mem": {Value: q(int64(4 + r.IntN(5)))}}}}
		}
		numDevices := 1 + r.IntN(4)
		for d := 0; d < numDevices; d++ {
			dev := resourceapi.Device{
				Name: fmt.Sprintf("d%d", d),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					"model": {StringValue: new([]string{"a", "b"}[r.IntN(2)])},
				},
			}
			if chance(0.8) {
				dev.Attributes["numa"] = resourceapi.DeviceAttribute{IntValue: new(int64(r.IntN(2)))}
			}
			if spec.PerDeviceNodeSelection != nil {
				if chance(0.7) {
					dev.NodeName = new("n1")
				} else {
					dev.NodeName = new("n2")
				}
			}
			if chance(0.2) {
				effect := []resourceapi.DeviceTaintEffect{resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone}[r.IntN(3)]
				dev.Taints = []resourceapi.DeviceTaint{{Key: "k", Value: []string{"v", "w"}[r.IntN(2)], Effect: effect}}
			}
			if counters && chance(0.8) {
				dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu", Counters: map[string]resourceapi.Counter{"mem": {Value: q(int64(2 + r.IntN(4)))}}}}
			}
			if chance(0.25) {
				dev.AllowMultipleAllocations = new(true)
				c := resourceapi.DeviceCapacity{Value: q(10)}
				if chance(0.5) {
					c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: new(q(2)), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: new(q(2)), Step: new(q(2))}}
				}
				dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bw": c}
			}
			if chance(0.1) {
				dev.BindingConditions = []string{"attached"}
			}
			spec.Devices = append(spec.Devices, dev)
			allDevices = append(allDevices, DeviceID{driver, poolName, dev.Name})
		}
		if counters {
			// Counter sets live in their own slice of the pool.
			cs := spec.DeepCopy()
			cs.Devices = nil
			spec.SharedCounters = nil
			spec.Pool.ResourceSliceCount++
			cs.Pool.ResourceSliceCount = spec.Pool.ResourceSliceCount
			in.slices = append(in.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: poolName + "-counters"}, Spec: *cs})
		}
		in.slices = append(in.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: poolName + "-s"}, Spec: spec})
		if chance(0.1) {
			old := spec.DeepCopy()
			old.Pool.Generation = 0
			old.Devices = append(old.Devices, resourceapi.Device{Name: "stale"})
			in.slices = append(in.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: poolName + "-old"}, Spec: *old})
		}
		if chance(0.05) {
			// A second publisher of the same generation: more slices than
			// announced.
			extra := spec.DeepCopy()
			extra.SharedCounters = nil
			extra.Devices = []resourceapi.Device{{Name: "extra", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: new("b")}}}}
			in.slices = append(in.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: poolName + "-extra"}, Spec: *extra})
		}
	}
	// A big pool: 30 to 35 devices, claimed all at once by a claim of
	// its own below, at and beyond the 32 results an allocation holds.
	bigDevices := 0
	if chance(0.05) {
		bigDevices = 30 + r.IntN(6)
		spec := resourceapi.ResourceSliceSpec{Driver: driver, NodeName: new("n1"), Pool: resourceapi.ResourcePool{Name: "big", Generation: 1, ResourceSliceCount: 1}}
		for d := range bigDevices {
			spec.Devices = append(spec.Devices, resourceapi.Device{Name: fmt.Sprintf("b%d", d), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: new("big")}}})
		}
		in.slices = append(in.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "big-s"}, Spec: spec})
	}
	if chance(0.1) {
		in.rules = []*resourceapi.DeviceTaintRule{{Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Pool: new("p0"), Device: new("d0")},
			Taint:          resourceapi.DeviceTaint{Key: "k", Value: "v", Effect: resourceapi.DeviceTaintEffectNoExecute},
		}}}
	}
	// Earlier allocations.
	for _, id := range allDevices {
		if chance(0.15) {
			res := resourceapi.DeviceRequestAllocationResult{Request: "x", Driver: id.Driver, Pool: id.Pool, Device: id.Device}
			if chance(0.5) {
				res.ShareID = new(types.UID("old"))
				res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"bw": q(int64(2 * (1 + r.IntN(4))))}
			}
			in.prior = append(in.prior, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{res}}})
		}
	}
	// Claims.
	numClaims := 1 + r.IntN(2)
	numRequests := 1 + r.IntN(4)
	for c := 0; c < numClaims; c++ {
		in.claims = append(in.claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("c%d", c)}})
	}
	randomSub := func() (class string, mode resourceapi.DeviceAllocationMode, count int64, sels []resourceapi.DeviceSelector, tols []resourceapi.DeviceToleration, capReq *resourceapi.CapacityRequirements) {
		class = classNames[r.IntN(len(classNames))]
		mode = resourceapi.DeviceAllocationModeExactCount
		count = 1
		if chance(0.3) {
			count = 2
		}
		if chance(0.1) {
			mode, count = resourceapi.DeviceAllocationModeAll, 0
		}
		if chance(0.2) {
			sels = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: []string{"model=b", "!model=a", "true"}[r.IntN(3)]}}}
		}
		if chance(0.3) {
			tols = []resourceapi.DeviceToleration{[]resourceapi.DeviceToleration{
				{Key: "k", Operator: resourceapi.DeviceTolerationOpExists},
				{Key: "k", Operator: resourceapi.DeviceTolerationOpEqual, Value: "v"},
				{Key: "k", Operator: resourceapi.DeviceTolerationOpEqual, Value: "v", Effect: resourceapi.DeviceTaintEffectNoSchedule},
				{Operator: resourceapi.DeviceTolerationOpExists},
			}[r.IntN(4)]}
		}
		if chance(0.12) {
			capReq = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{[]resourceapi.QualifiedName{"bw", "drv/bw"}[r.IntN(2)]: q(int64(1 + r.IntN(6)))}}
		}
		return
	}
	for i := 0; i < numRequests; i++ {
		claim := in.claims[r.IntN(numClaims)]
		name := fmt.Sprintf("r%d", i)
		req := resourceapi.DeviceRequest{Name: name}
		if chance(0.2) {
			for s := 0; s < 2; s++ {
				class, mode, count, sels, tols, capReq := randomSub()
				req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{Name: fmt.Sprintf("s%d", s), DeviceClassName: class, AllocationMode: mode, Count: count, Selectors: sels, Tolerations: tols, Capacity: capReq})
			}
		} else {
			class, mode, count, sels, tols, capReq := randomSub()
			req.Exactly = &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count, Selectors: sels, Tolerations: tols, Capacity: capReq}
			if chance(0.1) {
				req.Exactly.AdminAccess = new(true)
			}
		}
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, req)
	}
	for _, claim := range in.claims {
		if len(claim.Spec.Devices.Requests) == 0 {
			claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "only", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "any", Count: 1}}}
		}
		if chance(0.3) {
			c := resourceapi.DeviceConstraint{}
			if chance(0.5) {
				c.MatchAttribute = new(resourceapi.FullyQualifiedName("drv/model"))
			} else {
				c.DistinctAttribute = new(resourceapi.FullyQualifiedName("drv/numa"))
			}
			if chance(0.5) {
				for _, req := range claim.Spec.Devices.Requests {
					if chance(0.6) {
						c.Requests = append(c.Requests, req.Name)
					}
				}
			}
			claim.Spec.Devices.Constraints = append(claim.Spec.Devices.Constraints, c)
		}
	}
	if bigDevices > 0 {
		// Every device of the big pool, in allocationMode All or as an
		// exact count: one way to choose them, so the brute force stays
		// fast.
		req := &resourceapi.ExactDeviceRequest{DeviceClassName: "big", AllocationMode: resourceapi.DeviceAllocationModeAll}
		if chance(0.5) {
			req.AllocationMode, req.Count = resourceapi.DeviceAllocationModeExactCount, int64(bigDevices)
		}
		in.claims = append(in.claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cbig"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "big", Exactly: req}}}}})
	}
	return in
}

// coverage says which of the hard cases an instance holds: a pool whose
// newest generation has fewer slices than it announces, one with more,
// and a claim for more devices than an allocation holds (or for exactly
// as many as it holds, at most).
type coverage struct {
	incomplete, overFull, beyondLimit, atLimit bool
}

func coverageOf(in *instance) coverage {
	var c coverage
	type poolKey struct{ driver, pool string }
	newest := map[poolKey]int64{}
	for _, s := range in.slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	count, announced := map[poolKey]int64{}, map[poolKey]int64{}
	for _, s := range in.slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation == newest[k] {
			count[k]++
			announced[k] = s.Spec.Pool.ResourceSliceCount
		}
	}
	for k, n := range count {
		c.incomplete = c.incomplete || n < announced[k]
		c.overFull = c.overFull || n > announced[k]
	}
	for _, claim := range in.claims {
		for _, r := range claim.Spec.Devices.Requests {
			if r.Exactly == nil || r.Exactly.DeviceClassName != "big" {
				continue
			}
			n := 0
			for _, s := range in.slices {
				for _, d := range s.Spec.Devices {
					if a := d.Attributes["model"]; a.StringValue != nil && *a.StringValue == "big" {
						n++
					}
				}
			}
			c.beyondLimit = c.beyondLimit || n > resourceapi.AllocationResultsMaxSize
			c.atLimit = c.atLimit || n <= resourceapi.AllocationResultsMaxSize
		}
	}
	return c
}

func TestOracle(t *testing.T) {
	instances := 12000
	a := New(Options{Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "share" }})
	ctx := context.Background()
	feasible, failures := 0, 0
	var incomplete, overFull, beyondLimit, atLimitFeasible int
	for seed := uint64(0); seed < uint64(instances); seed++ {
		in := randomInstance(seed)
		cov := coverageOf(in)
		res, err := runChecked(ctx, a, in)
		if err != nil {
			failures++
			if failures <= 10 {
				t.Errorf("seed %d: %v", seed, err)
			}
			continue
		}
		want := oracleFeasible(in)
		if res.Fits() != want {
			failures++
			if failures <= 10 {
				t.Errorf("seed %d: allocator fits=%v, oracle=%v; explanation: %s", seed, res.Fits(), want, res.Explanation.Summary())
			}
		}
		if want {
			feasible++
		}
		if cov.incomplete {
			incomplete++
		}
		if cov.overFull {
			overFull++
		}
		if cov.beyondLimit {
			beyondLimit++
		}
		if cov.atLimit && want {
			atLimitFeasible++
		}
	}
	t.Logf("%d instances, %d feasible, %d disagreements or invalid results; %d with an incomplete pool, %d with an over-full pool, %d asking for more than %d devices in one claim, %d feasible asking for 30 to 32",
		instances, feasible, failures, incomplete, overFull, beyondLimit, resourceapi.AllocationResultsMaxSize, atLimitFeasible)
	// Floors: a generator that stopped producing feasible problems or the
	// hard cases would let the comparison pass without testing them.
	for _, floor := range []struct {
		what      string
		got, want int
	}{
		{"feasible instances", feasible, 2500},
		{"instances with an incomplete pool", incomplete, 500},
		{"instances with an over-full pool", overFull, 500},
		{"instances beyond the result limit", beyondLimit, 100},
		{"feasible instances at or just below the result limit", atLimitFeasible, 50},
	} {
		if floor.got < floor.want {
			t.Errorf("%d %s, want at least %d", floor.got, floor.what, floor.want)
		}
	}
}

// TestOracleSelectNode checks node selection on the same instances with a
// second node: a node is chosen exactly when the oracle finds one that
// fits, the chosen one fits, and its result is valid there.
func TestOracleSelectNode(t *testing.T) {
	a := New(Options{Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "share" }})
	n2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"zone": "z2"}}}
	failures := 0
	for seed := uint64(0); seed < 3000; seed++ {
		in := randomInstance(seed)
		nodes := []*corev1.Node{in.node, n2}
		inv := a.Prepare(in.snapshot())
		sel, err := a.SelectNode(context.Background(), inv.State(in.inUse()), in.claims, nodes)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		fits := map[string]bool{}
		for _, n := range nodes {
			on := *in
			on.node = n
			fits[n.Name] = oracleFeasible(&on)
		}
		var problem string
		switch {
		case sel.Chosen == nil && (fits["n1"] || fits["n2"]):
			problem = fmt.Sprintf("no node chosen, oracle: %v; %s", fits, sel.Summary())
		case sel.Chosen != nil && !fits[sel.Chosen.Node]:
			problem = fmt.Sprintf("chose %s, oracle: %v", sel.Chosen.Node, fits)
		case sel.Chosen != nil:
			on := *in
			on.node = nodes[0]
			if sel.Chosen.Node == "n2" {
				on.node = n2
			}
			if err := newRefWorld(&on).check(sel.Chosen.Allocations); err != nil {
				problem = "invalid result: " + err.Error()
			}
		}
		rejected := map[string]bool{}
		for _, r := range sel.Rejected {
			rejected[r.Node] = true
		}
		for _, n := range nodes {
			if rejected[n.Name] == fits[n.Name] {
				problem = fmt.Sprintf("node %s rejected=%v, oracle fits=%v", n.Name, rejected[n.Name], fits[n.Name])
			}
		}
		if problem != "" {
			failures++
			if failures <= 10 {
				t.Errorf("seed %d: %s", seed, problem)
			}
		}
	}
}
