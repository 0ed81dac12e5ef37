package allocator

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// plan is the node-independent part of allocating a pod's claims: classes
// resolved, selectors compiled, requests flattened into slots. SelectNode
// builds it once and reuses it for every node.
type plan struct {
	claims     []*resourceapi.ResourceClaim
	claimNames []string // namespace/name
	groups     []*group
	slots      []*slot
	// cons describes each claim's constraints.
	cons [][]constraintSpec
	// problems make the claims unallocatable on every node.
	problems []RequestExplanation
	// single is set for one claim with one plain request and no
	// constraints: its first viable candidates are a solution.
	single bool

	// Storage for a pod with one claim of one request, the common case,
	// so that its plan is one allocation; larger plans allocate arenas.
	inlineClaimNames [1]string
	inlineCons       [1][]constraintSpec
	inlineSlots      [1]slot
	inlineSlotPtrs   [1]*slot
	inlineGroups     [1]group
	inlineGroupPtrs  [1]*group
	inlineSelectors  [2]*exprCache
	// selectors holds the selectors of every slot, each slot's a
	// subslice; it only grows by append, so a subslice taken before it
	// moved stays valid.
	selectors []*exprCache
}

// buffer returns n elements of inline when they fit, else new ones.
func buffer[T any](inline []T, n int) []T {
	if n <= len(inline) {
		return inline[:n:n]
	}
	return make([]T, n)
}

type constraintSpec struct {
	match     bool
	attribute resourceapi.FullyQualifiedName
	values    *attrCache
	requests  []string
}

// slot is one request, or one subrequest of a firstAvailable request.
type slot struct {
	id      int
	claim   int
	request int
	group   int
	sub     int // -1 for a request without subrequests
	base    string
	name    string // "req" or "req/sub" as it appears in results

	class       *resourceapi.DeviceClass
	selectors   []*exprCache // class selectors first, then the request's
	numClass    int
	all         bool
	count       int
	admin       bool
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements
	// cons are the indices of the claim's constraints that apply.
	cons []int
	// problem is set when the slot can't be used on any node.
	problem *RequestExplanation
}

// group is one request with its alternatives: one slot for a plain
// request, one per subrequest for firstAvailable.
type group struct {
	claim, request int
	slots          []*slot
}

// newPlan plans the claims. The slots, groups and selectors of all claims
// share a few arenas (one allocation in all for one claim of one request):
// a plan is made per pod and per one-shot Allocate.
func newPlan(inv *Inventory, claims []*resourceapi.ResourceClaim) *plan {
	p := &plan{claims: claims}
	numSlots, numGroups := 0, 0
	for _, claim := range claims {
		for ri := range claim.Spec.Devices.Requests {
			numGroups++
			numSlots += max(1, len(claim.Spec.Devices.Requests[ri].FirstAvailable))
		}
	}
	p.claimNames = buffer(p.inlineClaimNames[:], len(claims))
	p.cons = buffer(p.inlineCons[:], len(claims))
	slots := buffer(p.inlineSlots[:], numSlots)[:0]
	p.slots = buffer(p.inlineSlotPtrs[:], numSlots)[:0]
	groups := buffer(p.inlineGroups[:], numGroups)[:0]
	p.groups = buffer(p.inlineGroupPtrs[:], numGroups)[:0]
	p.selectors = p.inlineSelectors[:0]
	for ci, claim := range claims {
		p.claimNames[ci] = claimKey(claim)
	}
	fail := func(r RequestExplanation) { p.problems = append(p.problems, r) }
	for ci, claim := range claims {
		claimName := p.claimNames[ci]
		p.addConstraints(inv, ci, claim)
		minDevices := 0
		for ri := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[ri]
			groups = append(groups, group{claim: ci, request: ri})
			g := &groups[len(groups)-1]
			gi, first := len(p.groups), len(p.slots)
			add := func(sl slot, className string, selectors []resourceapi.DeviceSelector, mode resourceapi.DeviceAllocationMode) {
				slots = append(slots, sl)
				s := &slots[len(slots)-1]
				s.id, s.claim, s.request, s.group = len(p.slots), ci, ri, gi
				p.slots = append(p.slots, s)
				p.resolve(inv, s, className, selectors, mode)
				s.cons = applicableConstraints(p.cons[ci], s)
				if s.problem != nil {
					s.problem.Claim = claimName
				}
			}
			switch {
			case req.Exactly != nil:
				e := req.Exactly
				add(slot{sub: -1, base: req.Name, name: req.Name,
					all: e.AllocationMode == resourceapi.DeviceAllocationModeAll, count: int(e.Count),
					admin: e.AdminAccess != nil && *e.AdminAccess, tolerations: e.Tolerations, capacity: e.Capacity,
				}, e.DeviceClassName, e.Selectors, e.AllocationMode)
			case len(req.FirstAvailable) > 0:
				for si := range req.FirstAvailable {
					sub := &req.FirstAvailable[si]
					add(slot{sub: si, base: req.Name, name: req.Name + "/" + sub.Name,
						all: sub.AllocationMode == resourceapi.DeviceAllocationModeAll, count: int(sub.Count),
						tolerations: sub.Tolerations, capacity: sub.Capacity,
					}, sub.DeviceClassName, sub.Selectors, sub.AllocationMode)
				}
			default:
				fail(RequestExplanation{Claim: claimName, Request: req.Name, Reason: ReasonInvalidRequest, Constraint: -1,
					Detail: "request has neither exactly nor firstAvailable"})
			}
			// The group's slots were added one after the other.
			g.slots = p.slots[first:len(p.slots):len(p.slots)]
			p.groups = append(p.groups, g)
			// A group is hopeless only if every alternative is.
			if least := g.leastDevices(); least < 0 {
				for _, sl := range g.slots {
					fail(*sl.problem)
				}
			} else {
				minDevices += least
			}
		}
		if minDevices > resourceapi.AllocationResultsMaxSize {
			fail(RequestExplanation{Claim: claimName, Reason: ReasonTooManyResults, Constraint: -1, Needed: minDevices,
				Detail: fmt.Sprintf("claim needs at least %d devices, at most %d can be allocated per claim", minDevices, resourceapi.AllocationResultsMaxSize)})
		}
	}
	p.single = len(p.slots) == 1 && len(p.groups) == 1 && len(p.cons[0]) == 0 && !p.slots[0].all
	return p
}

// addConstraints records the constraints of claim ci; one that names no
// attribute is a problem of the claim and constrains nothing.
func (p *plan) addConstraints(inv *Inventory, ci int, claim *resourceapi.ResourceClaim) {
	for k, c := range claim.Spec.Devices.Constraints {
		attr := c.MatchAttribute
		if attr == nil {
			attr = c.DistinctAttribute
		}
		if attr != nil && inv.listAttributes[*attr] {
			p.problems = append(p.problems, RequestExplanation{Claim: claimKey(claim), Reason: ReasonInvalidRequest, Constraint: k,
				Detail: fmt.Sprintf("constraint #%d compares %s, which some devices publish as a list attribute (DRAListTypeAttributes); "+
					"list attributes are stored and usable in selectors but not yet in matchAttribute or distinctAttribute", k, *attr)})
			p.cons[ci] = append(p.cons[ci], constraintSpec{})
			continue
		}
		switch {
		case c.MatchAttribute != nil:
			p.cons[ci] = append(p.cons[ci], constraintSpec{match: true, attribute: *c.MatchAttribute, values: inv.attribute(*c.MatchAttribute), requests: c.Requests})
		case c.DistinctAttribute != nil:
			p.cons[ci] = append(p.cons[ci], constraintSpec{attribute: *c.DistinctAttribute, values: inv.attribute(*c.DistinctAttribute), requests: c.Requests})
		default:
			p.problems = append(p.problems, RequestExplanation{Claim: claimKey(claim), Reason: ReasonInvalidRequest, Constraint: k,
				Detail: fmt.Sprintf("constraint #%d has neither matchAttribute nor distinctAttribute", k)})
			p.cons[ci] = append(p.cons[ci], constraintSpec{})
		}
	}
}

// leastDevices is the fewest devices one of the group's alternatives
// without a problem needs (an "all" request counts as one), or -1 when
// every alternative has a problem.
func (g *group) leastDevices() int {
	least := -1
	for _, sl := range g.slots {
		if sl.problem == nil {
			n := sl.count
			if sl.all {
				n = 1
			}
			if least < 0 || n < least {
				least = n
			}
		}
	}
	return least
}

// resolve looks up the class and compiles the selectors of a slot.
func (p *plan) resolve(inv *Inventory, sl *slot, className string, selectors []resourceapi.DeviceSelector, mode resourceapi.DeviceAllocationMode) {
	problem := func(reason Reason, detail string) {
		sl.problem = &RequestExplanation{Request: sl.name, Class: className, Reason: reason, Detail: detail, Constraint: -1}
	}
	switch mode {
	case "", resourceapi.DeviceAllocationModeExactCount:
		if sl.count <= 0 {
			// API defaulting makes this 1; treat an unset count the same.
			sl.count = 1
		}
	case resourceapi.DeviceAllocationModeAll:
	default:
		problem(ReasonInvalidRequest, fmt.Sprintf("unknown allocation mode %q", mode))
		return
	}
	class := inv.classes[className]
	if class == nil {
		problem(ReasonClassNotFound, fmt.Sprintf("device class %q does not exist", className))
		return
	}
	sl.class = class
	start := len(p.selectors)
	defer func() { sl.selectors = p.selectors[start:len(p.selectors):len(p.selectors)] }()
	for i, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			problem(ReasonSelectorInvalid, fmt.Sprintf("class %s selector #%d has no CEL expression", class.Name, i))
			return
		}
		e := inv.expr(sel.CEL.Expression)
		if e.compileErr != nil {
			problem(ReasonSelectorInvalid, fmt.Sprintf("class %s selector #%d: %s", class.Name, i, firstLine(e.compileErr)))
			return
		}
		p.selectors = append(p.selectors, e)
	}
	sl.numClass = len(p.selectors) - start
	for i, sel := range selectors {
		if sel.CEL == nil {
			problem(ReasonSelectorInvalid, fmt.Sprintf("selector #%d has no CEL expression", i))
			return
		}
		e := inv.expr(sel.CEL.Expression)
		if e.compileErr != nil {
			problem(ReasonSelectorInvalid, fmt.Sprintf("selector #%d: %s", i, firstLine(e.compileErr)))
			return
		}
		p.selectors = append(p.selectors, e)
	}
}

// firstLine keeps explanations on one line; CEL compile errors come with a
// multi-line excerpt of the expression.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

func applicableConstraints(cons []constraintSpec, sl *slot) []int {
	var out []int
	for k, c := range cons {
		if c.attribute == "" {
			continue
		}
		if len(c.requests) == 0 || slices.Contains(c.requests, sl.base) || (sl.sub >= 0 && slices.Contains(c.requests, sl.name)) {
			out = append(out, k)
		}
	}
	return out
}

// lookupAttribute finds an attribute by fully qualified name; attributes of
// the device's own driver may be published without the domain.
func lookupAttribute(d *device, name resourceapi.FullyQualifiedName) (resourceapi.DeviceAttribute, bool) {
	if attr, ok := d.api.Attributes[resourceapi.QualifiedName(name)]; ok {
		return attr, true
	}
	domain, id, found := strings.Cut(string(name), "/")
	if !found || domain != d.id.Driver {
		return resourceapi.DeviceAttribute{}, false
	}
	attr, ok := d.api.Attributes[resourceapi.QualifiedName(id)]
	return attr, ok
}

// untolerated returns the first NoSchedule or NoExecute taint that no
// toleration tolerates.
func untolerated(taints []resourceapi.DeviceTaint, tolerations []resourceapi.DeviceToleration) *resourceapi.DeviceTaint {
	for i := range taints {
		t := &taints[i]
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol resourceapi.DeviceToleration) bool { return tolerates(tol, t) }) {
			return t
		}
	}
	return nil
}

func tolerates(tol resourceapi.DeviceToleration, t *resourceapi.DeviceTaint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	switch tol.Operator {
	case resourceapi.DeviceTolerationOpExists:
		return tol.Key == "" || tol.Key == t.Key
	case "", resourceapi.DeviceTolerationOpEqual:
		return tol.Key == t.Key && tol.Value == t.Value
	}
	return false
}
