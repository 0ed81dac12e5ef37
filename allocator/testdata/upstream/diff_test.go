package upstreamcompare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

type DeviceID = allocator.DeviceID

type instance struct {
	classes map[string]*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	rules   []*resourceapi.DeviceTaintRule
	prior   []*resourceapi.AllocationResult
	claims  []*resourceapi.ResourceClaim
	node    *corev1.Node
}

func conv[T any](in any) T {
	var out T
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

// convAll converts each element of in through JSON.
func convAll[T, S any](in []S) []*T {
	out := make([]*T, 0, len(in))
	for _, v := range in {
		out = append(out, ptr(conv[T](v)))
	}
	return out
}

type v1lister map[string]*resourcev1.DeviceClass

func (l v1lister) List() ([]*resourcev1.DeviceClass, error) {
	var out []*resourcev1.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}
func (l v1lister) Get(name string) (*resourcev1.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("no class %s", name)
}

func upstreamFits(in *instance) (bool, error) {
	classes := v1lister{}
	for n, c := range in.classes {
		classes[n] = ptr(conv[resourcev1.DeviceClass](c))
	}
	slices := convAll[resourcev1.ResourceSlice](in.slices)
	claims := convAll[resourcev1.ResourceClaim](in.claims)
	state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	for _, a := range in.prior {
		for _, r := range a.Devices.Results {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			if r.ShareID == nil {
				state.AllocatedDevices.Insert(id)
				continue
			}
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			cc := map[resourcev1.QualifiedName]resource.Quantity{}
			for k, v := range r.ConsumedCapacity {
				cc[resourcev1.QualifiedName(k)] = v
			}
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, cc))
		}
	}
	a, err := structured.NewAllocator(context.Background(), features, state, classes, slices, cel.NewCache(100, cel.Features{EnableConsumableCapacity: true}))
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := a.Allocate(ctx, in.node, claims)
	return res != nil, err
}

// TestDifferential compares feasibility with the upstream allocator on the
// random instances of allocator/oracle_test.go (translated to CEL; no
// selector runtime errors, which upstream treats as fatal).
//
// Instances upstream cannot judge (it errs, gives up after 2s, or would
// need DeviceTaintRules) are not dropped: their seeds and our verdicts are
// written to the file named by $DRAPLANE_UPSTREAM_ORACLE_SEEDS, and
// allocator's TestUpstreamErrorsOracle (run right after this test by
// `make test-upstream-diff`) checks every one of them against the brute
// force of allocator/oracle_test.go.
func TestDifferential(t *testing.T) {
	ours := allocator.New(allocator.Options{})
	agree, disagree, upstreamErrors, withRules, withOverFull := 0, 0, 0, 0, 0
	var toOracle strings.Builder
	defer func() {
		path := os.Getenv("DRAPLANE_UPSTREAM_ORACLE_SEEDS")
		if path == "" {
			t.Logf("DRAPLANE_UPSTREAM_ORACLE_SEEDS unset: the %d instances upstream could not judge go unchecked (make test-upstream-diff checks them against the brute force)", upstreamErrors+withRules+withOverFull)
			return
		}
		if err := os.WriteFile(path, []byte(toOracle.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}()
	record := func(seed uint64, fits bool, why string) {
		fmt.Fprintf(&toOracle, "%d %v %s\n", seed, fits, strings.ReplaceAll(why, "\n", " "))
	}
	var slowest time.Duration
	var slowestSeed uint64
	defer func() { t.Logf("our slowest instance: seed %d, %v", slowestSeed, slowest) }()
	feasible := 0
	for seed := uint64(0); seed < 30000; seed++ {
		in := randomInstance(seed)
		inv := ours.Prepare(allocator.Snapshot{Classes: in.classes, Slices: in.slices, TaintRules: in.rules})
		u := allocator.NewInUse()
		for _, p := range in.prior {
			u.AddAllocation(p)
		}
		start := time.Now()
		res, err := ours.Allocate(context.Background(), inv.State(u), in.claims, in.node)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > slowest {
			slowest, slowestSeed = d, seed
		}
		if len(in.rules) > 0 {
			// Upstream takes DeviceTaintRules from an informer, not from
			// this call: the brute force judges these.
			withRules++
			record(seed, res.Fits(), "taint rules")
			continue
		}
		if overFull(in) {
			// A pool with more slices of its newest generation than it
			// announces: upstream allocates from it, we hold it incomplete
			// (two publishers of one pool, or a shrink without a new
			// generation). The brute force judges these.
			withOverFull++
			record(seed, res.Fits(), "over-full pool")
			continue
		}
		up, uerr := upstreamFits(in)
		if errors.Is(uerr, context.DeadlineExceeded) {
			t.Logf("seed %d: upstream gave up after 2s, ours fits=%v", seed, res.Fits())
			upstreamErrors++
			record(seed, res.Fits(), "upstream gave up after 2s")
			continue
		}
		if uerr != nil {
			upstreamErrors++
			record(seed, res.Fits(), "upstream error: "+uerr.Error())
			continue
		}
		if up == res.Fits() {
			agree++
			if up {
				feasible++
			}
			continue
		}
		disagree++
		if disagree <= 15 {
			t.Errorf("seed %d: upstream fits=%v, ours=%v (%s)", seed, up, res.Fits(), res.Explanation.Summary())
		}
	}
	// A floor, so that a generator change that makes every instance
	// trivially infeasible (or every one an upstream error) cannot pass.
	if agree < 20000 || feasible < 5000 {
		t.Errorf("only %d instances judged by both (%d feasible); want at least 20000 (5000 feasible)", agree, feasible)
	}
	t.Logf("agree %d (%d feasible), disagree %d; to the brute force: %d upstream errors, %d with taint rules, %d with an over-full pool", agree, feasible, disagree, upstreamErrors, withRules, withOverFull)
}

// overFull says whether a pool's newest generation has more slices than
// the pool announces.
func overFull(in *instance) bool {
	newest := map[string]int64{}
	for _, s := range in.slices {
		if g, ok := newest[s.Spec.Pool.Name]; !ok || s.Spec.Pool.Generation > g {
			newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
		}
	}
	count := map[string]int64{}
	for _, s := range in.slices {
		if s.Spec.Pool.Generation == newest[s.Spec.Pool.Name] {
			count[s.Spec.Pool.Name]++
			if count[s.Spec.Pool.Name] > s.Spec.Pool.ResourceSliceCount {
				return true
			}
		}
	}
	return false
}

// randomInstance is a copy of allocator/oracle_test.go's generator with
// the tests' selector language written in CEL, and the class whose
// selector errs (which upstream treats as fatal) never named: the sixth
// class name is "a". Keep the two in step: allocator's
// TestUpstreamErrorsOracle rebuilds instances from their seeds and fails
// when our verdict there differs from the one recorded here.
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
			"any": {ObjectMeta: metav1.ObjectMeta{Name: "any"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `!(device.attributes["drv"].model == "big")`}}}}},
			"a":   {ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["drv"].model == "a"`}}}}},
			"err": {ObjectMeta: metav1.ObjectMeta{Name: "err"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["drv"].model == "b" ? device.attributes["drv"].nosuch == 1 : true`}}, {CEL: &resourceapi.CELDeviceSelector{Expression: `!(device.attributes["drv"].model == "big")`}}}}},
			"big": {ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["drv"].model == "big"`}}}}},
		},
	}
	classNames := []string{"any", "any", "any", "any", "a", "a"}
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
			allDevices = append(allDevices, DeviceID{Driver: driver, Pool: poolName, Device: dev.Name})
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
			sels = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: []string{`device.attributes["drv"].model == "b"`, `!(device.attributes["drv"].model == "a")`, "true"}[r.IntN(3)]}}}
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
			claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "only", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "any", Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}
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
