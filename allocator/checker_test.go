package allocator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// This file is an independent statement of the allocation rules: it
// validates a finished allocation against the raw API objects without
// using any of the allocator's data structures. Every test runs every
// successful result through it.

// instance is everything one allocation decision depends on.
type instance struct {
	classes map[string]*resourceapi.DeviceClass
	slices  []*resourceapi.ResourceSlice
	rules   []*resourceapi.DeviceTaintRule
	prior   []*resourceapi.AllocationResult
	claims  []*resourceapi.ResourceClaim
	node    *corev1.Node
}

func (in *instance) snapshot() Snapshot {
	return Snapshot{Classes: in.classes, Slices: in.slices, TaintRules: in.rules}
}

func (in *instance) inUse() *InUse {
	u := NewInUse()
	for _, a := range in.prior {
		u.AddAllocation(a)
	}
	return u
}

// refDevice is the checker's view of one device.
type refDevice struct {
	id        DeviceID
	dev       *resourceapi.Device
	slice     *resourceapi.ResourceSlice
	usable    bool // pool complete and valid
	reachable bool
	counters  map[string]int64 // "set/counter" -> amount
}

type refWorld struct {
	in       *instance
	devices  map[DeviceID]*refDevice
	order    []DeviceID
	counters map[string]int64 // "driver/pool/set/counter" -> total
	// unusableOnNode: some unusable pool has a device reachable from the node.
	unusableOnNode bool
	// prior use
	exclusive map[DeviceID]bool
	shared    map[DeviceID]map[string]int64 // device -> capacity name -> milli
}

func newRefWorld(in *instance) *refWorld {
	w := &refWorld{in: in, devices: map[DeviceID]*refDevice{}, counters: map[string]int64{},
		exclusive: map[DeviceID]bool{}, shared: map[DeviceID]map[string]int64{}}
	pools := map[PoolID][]*resourceapi.ResourceSlice{}
	var ids []PoolID
	for _, s := range in.slices {
		id := PoolID{s.Spec.Driver, s.Spec.Pool.Name}
		if _, ok := pools[id]; !ok {
			ids = append(ids, id)
		}
		pools[id] = append(pools[id], s)
	}
	for _, id := range ids {
		all := pools[id]
		gen := all[0].Spec.Pool.Generation
		for _, s := range all {
			gen = max(gen, s.Spec.Pool.Generation)
		}
		var cur []*resourceapi.ResourceSlice
		for _, s := range all {
			if s.Spec.Pool.Generation == gen {
				cur = append(cur, s)
			}
		}
		// The newest generation must have exactly the announced number of
		// slices: fewer may hide devices, more come from conflicting publishers.
		usable := int64(len(cur)) == cur[0].Spec.Pool.ResourceSliceCount
		sets := map[string]map[string]bool{}
		for _, s := range cur {
			usable = usable && s.Spec.Pool.ResourceSliceCount == cur[0].Spec.Pool.ResourceSliceCount
			for _, cs := range s.Spec.SharedCounters {
				if sets[cs.Name] != nil {
					usable = false
				}
				sets[cs.Name] = map[string]bool{}
				for name, c := range cs.Counters {
					sets[cs.Name][name] = true
					w.counters[id.String()+"/"+cs.Name+"/"+name] = c.Value.MilliValue()
				}
			}
		}
		names := map[string]bool{}
		var devs []*refDevice
		for _, s := range cur {
			if len(s.Spec.SharedCounters) > 0 {
				continue // counter-set slices publish no usable devices
			}
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				if names[d.Name] {
					usable = false
				}
				names[d.Name] = true
				rd := &refDevice{id: DeviceID{id.Driver, id.Pool, d.Name}, dev: d, slice: s, counters: map[string]int64{}}
				for _, cc := range d.ConsumesCounters {
					for name, c := range cc.Counters {
						if !sets[cc.CounterSet][name] {
							usable = false
						}
						rd.counters[id.String()+"/"+cc.CounterSet+"/"+name] += c.Value.MilliValue()
					}
				}
				rd.reachable = w.reachable(rd)
				devs = append(devs, rd)
			}
		}
		for _, rd := range devs {
			rd.usable = usable
			w.devices[rd.id] = rd
			w.order = append(w.order, rd.id)
			if !usable && rd.reachable {
				w.unusableOnNode = true
			}
		}
	}
	for _, a := range in.prior {
		for _, r := range a.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := DeviceID{r.Driver, r.Pool, r.Device}
			if r.ShareID == nil {
				w.exclusive[id] = true
				continue
			}
			if w.shared[id] == nil {
				w.shared[id] = map[string]int64{}
			}
			for name, q := range r.ConsumedCapacity {
				w.shared[id][string(name)] += q.MilliValue()
			}
		}
	}
	return w
}

func (w *refWorld) reachable(rd *refDevice) bool {
	name, all, sel := rd.slice.Spec.NodeName, rd.slice.Spec.AllNodes, rd.slice.Spec.NodeSelector
	if rd.slice.Spec.PerDeviceNodeSelection != nil && *rd.slice.Spec.PerDeviceNodeSelection {
		name, all, sel = rd.dev.NodeName, rd.dev.AllNodes, rd.dev.NodeSelector
	}
	switch {
	case name != nil && *name != "":
		return *name == w.in.node.Name
	case all != nil && *all:
		return true
	case sel != nil:
		return refNodeSelectorMatches(sel, w.in.node)
	}
	return false
}

// refNodeSelectorMatches supports what the tests use: In on labels and on
// metadata.name.
func refNodeSelectorMatches(sel *corev1.NodeSelector, node *corev1.Node) bool {
	for _, t := range sel.NodeSelectorTerms {
		ok := len(t.MatchExpressions)+len(t.MatchFields) > 0
		for _, r := range t.MatchExpressions {
			ok = ok && r.Operator == corev1.NodeSelectorOpIn && slices.Contains(r.Values, node.Labels[r.Key])
		}
		for _, r := range t.MatchFields {
			ok = ok && r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn && slices.Contains(r.Values, node.Name)
		}
		if ok {
			return true
		}
	}
	return false
}

// refSlot is the request or subrequest a result belongs to.
type refSlot struct {
	base, name  string
	sub         bool
	class       string
	selectors   []resourceapi.DeviceSelector
	all         bool
	count       int
	admin       bool
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements
}

func refSlots(req *resourceapi.DeviceRequest) []refSlot {
	if e := req.Exactly; e != nil {
		return []refSlot{{base: req.Name, name: req.Name, class: e.DeviceClassName, selectors: e.Selectors,
			all: e.AllocationMode == resourceapi.DeviceAllocationModeAll, count: max(int(e.Count), 1),
			admin: e.AdminAccess != nil && *e.AdminAccess, tolerations: e.Tolerations, capacity: e.Capacity}}
	}
	var out []refSlot
	for _, s := range req.FirstAvailable {
		out = append(out, refSlot{base: req.Name, name: req.Name + "/" + s.Name, sub: true, class: s.DeviceClassName, selectors: s.Selectors,
			all: s.AllocationMode == resourceapi.DeviceAllocationModeAll, count: max(int(s.Count), 1),
			tolerations: s.Tolerations, capacity: s.Capacity})
	}
	return out
}

// selects says whether the class and request selectors accept the device.
func (w *refWorld) selects(sl refSlot, rd *refDevice) bool {
	class := w.in.classes[sl.class]
	if class == nil {
		return false
	}
	d := SelectorDevice{Driver: rd.id.Driver, Attributes: rd.dev.Attributes, Capacity: rd.dev.Capacity, AllowMultipleAllocations: rd.dev.AllowMultipleAllocations}
	for _, sel := range slices.Concat(class.Spec.Selectors, sl.selectors) {
		p, err := compileFake(sel.CEL.Expression)
		if err != nil {
			return false
		}
		ok, err := p(d)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

func (w *refWorld) taints(rd *refDevice) []resourceapi.DeviceTaint {
	out := slices.Clone(rd.dev.Taints)
	for _, r := range w.in.rules {
		s := r.Spec.DeviceSelector
		// No selector: the rule matches nothing.
		if s == nil || s.Driver != nil && *s.Driver != rd.id.Driver || s.Pool != nil && *s.Pool != rd.id.Pool || s.Device != nil && *s.Device != rd.id.Device {
			continue
		}
		out = append(out, r.Spec.Taint)
	}
	return out
}

func (w *refWorld) tolerated(sl refSlot, rd *refDevice) bool {
	for _, t := range w.taints(rd) {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		ok := false
		for _, tol := range sl.tolerations {
			keyOK := tol.Key == t.Key || tol.Key == "" && tol.Operator == resourceapi.DeviceTolerationOpExists
			valueOK := tol.Operator == resourceapi.DeviceTolerationOpExists || tol.Value == t.Value
			effectOK := tol.Effect == "" || tol.Effect == t.Effect
			ok = ok || keyOK && valueOK && effectOK
		}
		if !ok {
			return false
		}
	}
	return true
}

func isMulti(rd *refDevice) bool {
	return rd.dev.AllowMultipleAllocations != nil && *rd.dev.AllowMultipleAllocations
}

// consumption computes what the request takes of each device capacity
// (keyed as published); ok is false if the request names a capacity the
// device lacks or the policy forbids the amount.
func consumption(sl refSlot, rd *refDevice) (map[string]int64, bool) {
	out := map[string]int64{}
	requested := map[string]int64{}
	if sl.capacity != nil {
		for name, q := range sl.capacity.Requests {
			key := ""
			for devName := range rd.dev.Capacity {
				if devName == name {
					key = string(devName)
				}
			}
			if key == "" {
				return nil, false
			}
			if _, dup := requested[key]; dup {
				return nil, false
			}
			requested[key] = q.MilliValue()
		}
	}
	for name, c := range rd.dev.Capacity {
		total := c.Value.MilliValue()
		v, asked := requested[string(name)]
		p := c.RequestPolicy
		switch {
		case !asked && p != nil && p.Default != nil:
			v = p.Default.MilliValue()
		case !asked:
			v = total
		case p != nil && p.ValidRange != nil && p.ValidRange.Min != nil:
			lo := p.ValidRange.Min.MilliValue()
			v = max(v, lo)
			if p.ValidRange.Step != nil {
				step := p.ValidRange.Step.MilliValue()
				for (v-lo)%step != 0 {
					v++
				}
			}
			if p.ValidRange.Max != nil && v > p.ValidRange.Max.MilliValue() {
				return nil, false
			}
		case p != nil && len(p.ValidValues) > 0:
			best := int64(-1)
			for _, vv := range p.ValidValues {
				if m := vv.MilliValue(); m >= v && (best < 0 || m < best) {
					best = m
				}
			}
			if best < 0 {
				return nil, false
			}
			v = best
		}
		if v > total {
			return nil, false
		}
		out[string(name)] = v
	}
	return out, true
}

// allSet is what an "All" request must get: every reachable device of a
// usable pool that matches and could hold the request.
func (w *refWorld) allSet(sl refSlot) []DeviceID {
	var out []DeviceID
	for _, id := range w.order {
		rd := w.devices[id]
		if !rd.usable || !rd.reachable || !w.selects(sl, rd) {
			continue
		}
		// Membership depends on the device's capacity, not on what others
		// use of it: a device they filled up makes the request fail.
		if _, ok := consumption(sl, rd); !ok {
			continue
		}
		out = append(out, id)
	}
	return out
}

func refAttr(rd *refDevice, name resourceapi.FullyQualifiedName) (string, bool) {
	a, ok := rd.dev.Attributes[resourceapi.QualifiedName(name)]
	if !ok {
		domain, id, _ := strings.Cut(string(name), "/")
		if domain != rd.id.Driver {
			return "", false
		}
		a, ok = rd.dev.Attributes[resourceapi.QualifiedName(id)]
		if !ok {
			return "", false
		}
	}
	switch {
	case a.StringValue != nil:
		return "string:" + *a.StringValue, true
	case a.IntValue != nil:
		return fmt.Sprint("int:", *a.IntValue), true
	case a.BoolValue != nil:
		return fmt.Sprint("bool:", *a.BoolValue), true
	case a.VersionValue != nil:
		return "version:" + *a.VersionValue, true
	}
	return "", false
}

// check validates the allocations of all claims (in claim order) against
// every rule. It returns nil for a valid allocation.
func (w *refWorld) check(allocs []*resourceapi.AllocationResult) error {
	in := w.in
	if len(allocs) != len(in.claims) {
		return fmt.Errorf("%d allocations for %d claims", len(allocs), len(in.claims))
	}
	taken := map[DeviceID]map[int]bool{}
	shares := map[DeviceID]int{}
	capUse := map[DeviceID]map[string]int64{}
	counterUse := map[string]int64{}
	for ci, claim := range in.claims {
		ar := allocs[ci]
		if ar == nil {
			return fmt.Errorf("claim %d: no allocation", ci)
		}
		results := ar.Devices.Results
		if len(results) > resourceapi.AllocationResultsMaxSize {
			return fmt.Errorf("claim %d: %d results", ci, len(results))
		}
		// Which slot does each request use?
		bySlot := map[string][]int{}
		for i, r := range results {
			bySlot[r.Request] = append(bySlot[r.Request], i)
		}
		slotOf := map[string]refSlot{}
		for ri := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[ri]
			var used []refSlot
			for _, sl := range refSlots(req) {
				if len(bySlot[sl.name]) > 0 {
					used = append(used, sl)
				}
			}
			if len(used) != 1 {
				return fmt.Errorf("claim %d request %s: %d alternatives have results", ci, req.Name, len(used))
			}
			sl := used[0]
			// With firstAvailable, an earlier alternative that would also work
			// is acceptable only if the search chose otherwise for a reason,
			// which the oracle covers; the checker only checks validity.
			got := bySlot[sl.name]
			if sl.all {
				if w.unusableOnNode {
					return fmt.Errorf("claim %d request %s: all devices requested while a pool on the node is unusable", ci, sl.name)
				}
				want := w.allSet(sl)
				var have []DeviceID
				for _, i := range got {
					have = append(have, DeviceID{results[i].Driver, results[i].Pool, results[i].Device})
				}
				slices.SortFunc(want, cmpID)
				slices.SortFunc(have, cmpID)
				if len(want) == 0 || !slices.Equal(want, have) {
					return fmt.Errorf("claim %d request %s: all = %v, got %v", ci, sl.name, want, have)
				}
			} else if len(got) != sl.count {
				return fmt.Errorf("claim %d request %s: want %d devices, got %d", ci, sl.name, sl.count, len(got))
			}
			slotOf[sl.name] = sl
		}
		if len(slotOf) != len(bySlot) {
			return fmt.Errorf("claim %d: results for unknown requests: %v", ci, bySlot)
		}
		seenInRequest := map[string]bool{}
		for _, r := range results {
			sl := slotOf[r.Request]
			id := DeviceID{r.Driver, r.Pool, r.Device}
			rd := w.devices[id]
			switch {
			case rd == nil:
				return fmt.Errorf("claim %d: unknown device %s", ci, id)
			case !rd.usable:
				return fmt.Errorf("claim %d: device %s from unusable pool", ci, id)
			case !rd.reachable:
				return fmt.Errorf("claim %d: device %s not reachable from node", ci, id)
			case !w.selects(sl, rd):
				return fmt.Errorf("claim %d: device %s does not match request %s", ci, id, sl.name)
			case !w.tolerated(sl, rd):
				return fmt.Errorf("claim %d: device %s has a taint request %s does not tolerate", ci, id, sl.name)
			case deref(r.AdminAccess) != sl.admin:
				return fmt.Errorf("claim %d: device %s adminAccess %v", ci, id, r.AdminAccess)
			case !slices.Equal(r.Tolerations, sl.tolerations):
				return fmt.Errorf("claim %d: device %s tolerations not copied", ci, id)
			case !slices.Equal(r.BindingConditions, rd.dev.BindingConditions):
				return fmt.Errorf("claim %d: device %s binding conditions not copied", ci, id)
			}
			key := r.Request + "|" + id.String()
			if seenInRequest[key] {
				return fmt.Errorf("claim %d: device %s twice in request %s", ci, id, r.Request)
			}
			seenInRequest[key] = true
			use, ok := consumption(sl, rd)
			if !ok {
				return fmt.Errorf("claim %d: device %s lacks capacity for %s", ci, id, sl.name)
			}
			multi := isMulti(rd)
			if !multi {
				if r.ShareID != nil {
					return fmt.Errorf("claim %d: device %s has a share ID but is exclusive", ci, id)
				}
				if sl.admin {
					if taken[id][ci] {
						return fmt.Errorf("claim %d: device %s twice in the claim", ci, id)
					}
				} else if w.exclusive[id] || len(taken[id]) > 0 {
					return fmt.Errorf("claim %d: device %s already allocated", ci, id)
				}
				if taken[id] == nil {
					taken[id] = map[int]bool{}
				}
				taken[id][ci] = true
			} else {
				if !sl.admin && w.exclusive[id] {
					return fmt.Errorf("claim %d: shared device %s allocated exclusively", ci, id)
				}
				if r.ShareID == nil {
					return fmt.Errorf("claim %d: device %s allows multiple allocations but has no share ID", ci, id)
				}
				for name, v := range use {
					q := r.ConsumedCapacity[resourceapi.QualifiedName(name)]
					if q.MilliValue() != v {
						return fmt.Errorf("claim %d: device %s consumed %s = %v, want %dm", ci, id, name, r.ConsumedCapacity, v)
					}
				}
				if len(r.ConsumedCapacity) != len(use) {
					return fmt.Errorf("claim %d: device %s consumed capacity %v, want %v", ci, id, r.ConsumedCapacity, use)
				}
				if capUse[id] == nil {
					capUse[id] = map[string]int64{}
				}
				for name, v := range use {
					capUse[id][name] += v
				}
			}
			if len(rd.counters) > 0 && !(multi && (w.shared[id] != nil || shares[id] > 0)) {
				for name, v := range rd.counters {
					counterUse[name] += v
				}
			}
			if multi {
				shares[id]++
			}
		}
		// Constraints.
		for k, c := range claim.Spec.Devices.Constraints {
			values := map[string]int{}
			n := 0
			for _, r := range results {
				sl := slotOf[r.Request]
				if len(c.Requests) > 0 && !slices.Contains(c.Requests, sl.base) && !(sl.sub && slices.Contains(c.Requests, sl.name)) {
					continue
				}
				rd := w.devices[DeviceID{r.Driver, r.Pool, r.Device}]
				v, ok := refAttr(rd, constraintAttribute(c))
				if !ok {
					return fmt.Errorf("claim %d constraint %d: device %s lacks the attribute", ci, k, rd.id)
				}
				values[v]++
				n++
			}
			if c.MatchAttribute != nil && len(values) > 1 {
				return fmt.Errorf("claim %d constraint %d: values differ: %v", ci, k, values)
			}
			if c.DistinctAttribute != nil && len(values) != n {
				return fmt.Errorf("claim %d constraint %d: values repeat: %v", ci, k, values)
			}
		}
		if ar.NodeSelector != nil && !refNodeSelectorMatches(ar.NodeSelector, in.node) {
			return fmt.Errorf("claim %d: node selector %v does not match the node", ci, ar.NodeSelector)
		}
	}
	// Counters touched by the new allocation must not be overdrawn.
	if len(counterUse) > 0 {
		prior := map[string]int64{}
		for id, rd := range w.devices {
			if w.exclusive[id] || w.shared[id] != nil {
				for name, v := range rd.counters {
					prior[name] += v
				}
			}
		}
		for name, v := range counterUse {
			if prior[name]+v > w.counters[name] {
				return fmt.Errorf("counter %s overdrawn: %d + %d > %d", name, prior[name], v, w.counters[name])
			}
		}
	}
	for id, use := range capUse {
		rd := w.devices[id]
		for name, v := range use {
			c := rd.dev.Capacity[resourceapi.QualifiedName(name)]
			if total := c.Value.MilliValue(); v+w.shared[id][name] > total {
				return fmt.Errorf("device %s capacity %s overdrawn", id, name)
			}
		}
	}
	return nil
}

func cmpID(a, b DeviceID) int { return strings.Compare(a.String(), b.String()) }

var errNoSolution = errors.New("no solution")

// runChecked allocates and validates the result, failing the test on an
// invalid one.
func runChecked(ctx context.Context, a *Allocator, in *instance) (Result, error) {
	inv := a.Prepare(in.snapshot())
	res, err := a.Allocate(ctx, inv.State(in.inUse()), in.claims, in.node)
	if err != nil {
		return res, err
	}
	if res.Fits() {
		if err := newRefWorld(in).check(res.Allocations); err != nil {
			return res, fmt.Errorf("invalid allocation: %w", err)
		}
	}
	return res, nil
}
