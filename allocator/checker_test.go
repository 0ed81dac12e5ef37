package allocator

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// This file is an independent statement of the allocation rules: it
// validates a finished allocation against the raw API objects, written
// from the API's rules alone. It uses nothing of the allocator, neither
// its data structures nor its helpers, only what the allocator returns
// (resourceapi.AllocationResult); TestCheckerIsIndependent keeps it so.
// Every test runs every successful result through it.

// refDevice is the checker's view of one device.
type refDevice struct {
	id        refID
	dev       *resourceapi.Device
	slice     *resourceapi.ResourceSlice
	usable    bool // pool complete and valid
	reachable bool
	counters  map[string]int64 // "set/counter" -> amount
}

type refWorld struct {
	in       *instance
	devices  map[refID]*refDevice
	order    []refID
	counters map[string]int64 // "driver/pool/set/counter" -> total
	// unusableOnNode: some unusable pool has a device reachable from the node.
	unusableOnNode bool
	// prior use
	exclusive map[refID]bool
	shared    map[refID]map[string]int64 // device -> capacity name -> milli
}

func newRefWorld(in *instance) *refWorld {
	w := &refWorld{in: in, devices: map[refID]*refDevice{}, counters: map[string]int64{},
		exclusive: map[refID]bool{}, shared: map[refID]map[string]int64{}}
	pools := map[refPool][]*resourceapi.ResourceSlice{}
	var ids []refPool
	for _, s := range in.slices {
		id := refPool{s.Spec.Driver, s.Spec.Pool.Name}
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
				rd := &refDevice{id: refID{id.driver, id.pool, d.Name}, dev: d, slice: s, counters: map[string]int64{}}
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
			id := refID{r.Driver, r.Pool, r.Device}
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
	for _, sel := range slices.Concat(class.Spec.Selectors, sl.selectors) {
		if sel.CEL == nil {
			return false
		}
		ok, err := refEval(sel.CEL.Expression, rd.dev)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// refEval evaluates the tests' selector language (see fakeCompiler) on a
// device as published: true, false, error, KEY=VALUE (string attribute
// KEY equals VALUE), !EXPR, errorif:EXPR (fails where EXPR holds). A
// selector that does not parse or fails selects nothing.
func refEval(expr string, dev *resourceapi.Device) (bool, error) {
	switch expr {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "error":
		return false, errors.New("evaluation error")
	}
	if inner, ok := strings.CutPrefix(expr, "errorif:"); ok {
		holds, err := refEval(inner, dev)
		if err != nil || holds {
			return false, errors.New("evaluation error")
		}
		return true, nil
	}
	if inner, ok := strings.CutPrefix(expr, "!"); ok {
		holds, err := refEval(inner, dev)
		return !holds && err == nil, err
	}
	key, value, ok := strings.Cut(expr, "=")
	if !ok {
		return false, errors.New("does not parse: " + expr)
	}
	a, ok := dev.Attributes[resourceapi.QualifiedName(key)]
	return ok && a.StringValue != nil && *a.StringValue == value, nil
}

func (w *refWorld) taints(rd *refDevice) []resourceapi.DeviceTaint {
	out := slices.Clone(rd.dev.Taints)
	for _, r := range w.in.rules {
		s := r.Spec.DeviceSelector
		// No selector: the rule matches nothing.
		if s == nil || s.Driver != nil && *s.Driver != rd.id.driver || s.Pool != nil && *s.Pool != rd.id.pool || s.Device != nil && *s.Device != rd.id.device {
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
func (w *refWorld) allSet(sl refSlot) []refID {
	var out []refID
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
		if domain != rd.id.driver {
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
	taken := map[refID]map[int]bool{}
	shares := map[refID]int{}
	capUse := map[refID]map[string]int64{}
	drawn := map[string]int64{}
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
				var have []refID
				for _, i := range got {
					have = append(have, refID{results[i].Driver, results[i].Pool, results[i].Device})
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
			id := refID{r.Driver, r.Pool, r.Device}
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
			case isTrue(r.AdminAccess) != sl.admin:
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
					drawn[name] += v
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
				rd := w.devices[refID{r.Driver, r.Pool, r.Device}]
				v, ok := refAttr(rd, refConstraintAttribute(c))
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
	if len(drawn) > 0 {
		prior := map[string]int64{}
		for id, rd := range w.devices {
			if w.exclusive[id] || w.shared[id] != nil {
				for name, v := range rd.counters {
					prior[name] += v
				}
			}
		}
		for name, v := range drawn {
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

func cmpID(a, b refID) int { return strings.Compare(a.String(), b.String()) }

// refID names a device; refPool a pool.
type refID struct{ driver, pool, device string }

func (id refID) String() string { return id.driver + "/" + id.pool + "/" + id.device }

type refPool struct{ driver, pool string }

func (p refPool) String() string { return p.driver + "/" + p.pool }

func isTrue(b *bool) bool { return b != nil && *b }

// refConstraintAttribute is the attribute a constraint is about: exactly
// one of matchAttribute and distinctAttribute is set.
func refConstraintAttribute(c resourceapi.DeviceConstraint) resourceapi.FullyQualifiedName {
	if c.MatchAttribute != nil {
		return *c.MatchAttribute
	}
	if c.DistinctAttribute != nil {
		return *c.DistinctAttribute
	}
	return ""
}
