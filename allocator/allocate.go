package allocator

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Result is the outcome of allocating a pod's claims on one node: either
// one AllocationResult per claim (in the order of the claims) or an
// explanation of why they don't fit.
type Result struct {
	Node        string
	Allocations []*resourceapi.AllocationResult
	Explanation *Explanation
}

// Fits reports whether the claims could be allocated.
func (r *Result) Fits() bool { return r.Explanation == nil }

// slot is one request or one subrequest of a request, with its candidate
// devices on the node under consideration.
type slot struct {
	claim   int
	request int
	sub     int // -1 for a request without subrequests
	base    string
	name    string // "req" or "req/sub" as it appears in results

	class       *resourceapi.DeviceClass
	selectors   []*exprCache // class selectors first, then the request's
	numClass    int
	all         bool
	need        int
	admin       bool
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements

	// cands are the devices that pass every check that does not depend on
	// other choices of the search.
	cands []cand
	// cons are the claim's constraints that apply to this slot.
	cons []int
	// problem explains why the slot cannot be satisfied by itself, nil if
	// it might be.
	problem *RequestExplanation
}

type cand struct {
	d *device
	// consume is the capacity this request takes from the device, aligned
	// with device.caps; only tracked for devices that allow multiple
	// allocations.
	consume []int64
	// keys identify the constraint attribute values, aligned with slot.cons;
	// -1 when the device lacks the attribute.
	keys []int32
}

// group is one request of a claim with its alternatives: one slot for a
// plain request, one per subrequest for firstAvailable.
type group struct {
	claim, request int
	slots          []*slot
	chosen         int
}

type pick struct {
	slot *slot
	cand *cand
}

// constraintState tracks one claim constraint during the search.
type constraintState struct {
	match bool
	// For matchAttribute: the value all devices share and how many devices
	// are in the set.
	value int32
	count int
	// For distinctAttribute: how many devices use each value.
	used map[int32]int
	// disabled constraints always accept; explanations use this to find
	// the constraint to blame.
	disabled bool
}

func (c *constraintState) add(key int32) bool {
	if c.disabled {
		return true
	}
	if key < 0 {
		return false
	}
	if c.match {
		if c.count > 0 && c.value != key {
			return false
		}
		c.value = key
		c.count++
		return true
	}
	if c.used[key] > 0 {
		return false
	}
	c.used[key]++
	return true
}

func (c *constraintState) remove(key int32) {
	if c.disabled {
		return
	}
	if c.match {
		c.count--
		return
	}
	c.used[key]--
}

// search is the state of one Allocate call.
type search struct {
	ctx    context.Context
	st     *State
	claims []*resourceapi.ResourceClaim
	groups []*group
	cons   [][]*constraintState

	taken       map[int]uint64 // device index -> bit set of claims holding it
	shares      map[int]int    // device index -> allocations in this attempt
	capUsed     map[int][]int64
	counterUsed map[int]int64
	picks       [][]pick
	steps       int
	budget      int // 0: unlimited
	err         error
}

// Allocate tries to allocate all claims of one pod on the node. Claims that
// are already allocated must not be passed. The error is only set when the
// search could not run (cancelled context, too many claims); "doesn't fit"
// is a Result with an Explanation.
func (a *Allocator) Allocate(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim, node *corev1.Node) (Result, error) {
	res := Result{Node: node.Name}
	if len(claims) > 64 {
		return res, fmt.Errorf("%d claims, at most 64 can be allocated together", len(claims))
	}
	view := st.inv.view(node)
	s := &search{ctx: ctx, st: st, claims: claims}
	expl := s.build(view)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if expl == nil {
		s.reset()
		if s.run() {
			res.Allocations = a.results(s, node)
			return res, nil
		}
		if s.err != nil {
			return res, s.err
		}
		expl = s.explainSearchFailure()
	}
	expl.Node = node.Name
	for _, p := range view.unusable {
		expl.UnusablePools = append(expl.UnusablePools, p.problem())
	}
	res.Explanation = expl
	return res, nil
}

// build resolves classes and selectors and computes the candidates of every
// slot. It returns an explanation if some request cannot be satisfied even
// on its own.
func (s *search) build(view *nodeView) *Explanation {
	var expl *Explanation
	fail := func(r RequestExplanation) {
		if expl == nil {
			expl = &Explanation{}
		}
		expl.Requests = append(expl.Requests, r)
	}
	interned := make(map[string]int32)
	s.cons = make([][]*constraintState, len(s.claims))
	for ci, claim := range s.claims {
		claimName := claimKey(claim)
		for k, c := range claim.Spec.Devices.Constraints {
			switch {
			case c.MatchAttribute != nil:
				s.cons[ci] = append(s.cons[ci], &constraintState{match: true})
			case c.DistinctAttribute != nil:
				s.cons[ci] = append(s.cons[ci], &constraintState{used: make(map[int32]int)})
			default:
				fail(RequestExplanation{Claim: claimName, Reason: ReasonInvalidRequest, Constraint: k,
					Message: fmt.Sprintf("constraint #%d has neither matchAttribute nor distinctAttribute", k)})
				s.cons[ci] = append(s.cons[ci], &constraintState{disabled: true})
			}
		}
		minDevices := 0
		for ri := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[ri]
			g := &group{claim: ci, request: ri}
			switch {
			case req.Exactly != nil:
				e := req.Exactly
				g.slots = append(g.slots, &slot{
					claim: ci, request: ri, sub: -1, base: req.Name, name: req.Name,
					all: e.AllocationMode == resourceapi.DeviceAllocationModeAll, need: int(e.Count),
					admin: e.AdminAccess != nil && *e.AdminAccess, tolerations: e.Tolerations, capacity: e.Capacity,
				})
				s.resolve(g.slots[0], e.DeviceClassName, e.Selectors, e.AllocationMode)
			case len(req.FirstAvailable) > 0:
				for si := range req.FirstAvailable {
					sub := &req.FirstAvailable[si]
					sl := &slot{
						claim: ci, request: ri, sub: si, base: req.Name, name: req.Name + "/" + sub.Name,
						all: sub.AllocationMode == resourceapi.DeviceAllocationModeAll, need: int(sub.Count),
						tolerations: sub.Tolerations, capacity: sub.Capacity,
					}
					g.slots = append(g.slots, sl)
					s.resolve(sl, sub.DeviceClassName, sub.Selectors, sub.AllocationMode)
				}
			default:
				fail(RequestExplanation{Claim: claimName, Request: req.Name, Reason: ReasonInvalidRequest,
					Message: "request has neither exactly nor firstAvailable"})
				continue
			}
			for _, sl := range g.slots {
				sl.cons = applicableConstraints(claim, sl)
				if sl.problem == nil {
					s.candidates(sl, view, interned)
				}
				if sl.problem != nil {
					sl.problem.Claim = claimName
				}
			}
			// The group is hopeless only if every alternative is.
			least := -1
			usable := false
			for _, sl := range g.slots {
				if sl.problem == nil {
					usable = true
					if least < 0 || sl.need < least {
						least = sl.need
					}
				}
			}
			if !usable {
				for _, sl := range g.slots {
					fail(*sl.problem)
				}
			} else {
				minDevices += least
			}
			s.groups = append(s.groups, g)
		}
		if minDevices > resourceapi.AllocationResultsMaxSize {
			fail(RequestExplanation{Claim: claimName, Reason: ReasonTooManyResults, Constraint: -1,
				Message: fmt.Sprintf("claim needs at least %d devices, at most %d can be allocated per claim", minDevices, resourceapi.AllocationResultsMaxSize)})
		}
	}
	return expl
}

// resolve looks up the class and compiles the selectors of a slot.
func (s *search) resolve(sl *slot, className string, selectors []resourceapi.DeviceSelector, mode resourceapi.DeviceAllocationMode) {
	inv := s.st.inv
	problem := func(reason Reason, msg string) {
		sl.problem = &RequestExplanation{Request: sl.name, Reason: reason, Message: msg, Constraint: -1}
	}
	switch mode {
	case "", resourceapi.DeviceAllocationModeExactCount:
		if sl.need <= 0 {
			// API defaulting makes this 1; treat an unset count the same.
			sl.need = 1
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
		sl.selectors = append(sl.selectors, e)
	}
	sl.numClass = len(sl.selectors)
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
		sl.selectors = append(sl.selectors, e)
	}
}

func applicableConstraints(claim *resourceapi.ResourceClaim, sl *slot) []int {
	var out []int
	for k, c := range claim.Spec.Devices.Constraints {
		if len(c.Requests) == 0 || slices.Contains(c.Requests, sl.base) || (sl.sub >= 0 && slices.Contains(c.Requests, sl.name)) {
			out = append(out, k)
		}
	}
	return out
}

// candidates filters the node's devices for a slot, counting how many
// survive each check so that a failure can say which check removed them.
func (s *search) candidates(sl *slot, view *nodeView, interned map[string]int32) {
	st := s.st
	claim := s.claims[sl.claim]
	var counts DeviceCounts
	counts.OnNode = len(view.devices)
	var (
		rejectedBy   = make([]int, len(sl.selectors))
		evalErr      error
		evalErrCount int
		taint        *resourceapi.DeviceTaint
	)
	for _, d := range view.devices {
		if s.ctx.Err() != nil {
			return
		}
		if sl.numClass == 0 {
			counts.MatchedClass++
		}
		matched := true
		for i, e := range sl.selectors {
			ok, err := e.match(s.ctx, d)
			if err != nil {
				evalErrCount++
				if evalErr == nil {
					evalErr = fmt.Errorf("device %s: %w", d.id, err)
				}
			}
			if !ok {
				rejectedBy[i]++
				matched = false
				break
			}
			if i+1 == sl.numClass {
				counts.MatchedClass++
			}
		}
		if !matched {
			continue
		}
		counts.MatchedSelectors++

		consume, fits := capacityFit(sl.capacity, d, st)
		if !fits {
			continue
		}
		counts.WithCapacity++

		c := cand{d: d, consume: consume}
		if len(sl.cons) > 0 {
			c.keys = make([]int32, len(sl.cons))
			for k, ci := range sl.cons {
				c.keys[k] = attributeKey(d, constraintAttribute(claim.Spec.Devices.Constraints[ci]), interned)
			}
		}
		if t := untolerated(d.taints, sl.tolerations); t != nil {
			if taint == nil {
				taint = t
			}
			if sl.all {
				sl.cands = append(sl.cands, c)
			}
			continue
		}
		counts.Tolerated++
		if st.busy[d.index] && !sl.admin {
			if sl.all {
				sl.cands = append(sl.cands, c)
			}
			continue
		}
		counts.Free++
		if !countersFree(d, st) {
			if sl.all {
				sl.cands = append(sl.cands, c)
			}
			continue
		}
		counts.Available++
		sl.cands = append(sl.cands, c)
	}

	if sl.all {
		sl.need = len(sl.cands)
	} else {
		preferPacked(sl.cands, st)
	}
	r := &RequestExplanation{Request: sl.name, Needed: sl.need, Counts: counts, Constraint: -1}
	if evalErr != nil {
		r.SelectorError = evalErr.Error()
		r.SelectorErrors = evalErrCount
	}
	worstSelector := func() {
		for i, n := range rejectedBy {
			if n > 0 {
				r.Selector = sl.selectors[i].expression
				r.SelectorRejected = n
				return
			}
		}
	}
	need := sl.need
	if sl.all {
		need = 1
	}
	switch {
	case sl.all && len(view.unusable) > 0:
		r.Reason = ReasonPoolUnusable
		r.Message = fmt.Sprintf("asks for all devices, but %s", view.unusable[0].problem())
	case counts.OnNode < need:
		r.Reason = ReasonNoDevices
	case counts.MatchedClass < need:
		r.Reason = ReasonClassMismatch
		worstSelector()
	case counts.MatchedSelectors < need:
		r.Reason = ReasonSelectorMismatch
		worstSelector()
	case counts.WithCapacity < need:
		r.Reason = ReasonCapacity
	case counts.Tolerated < need || sl.all && counts.Tolerated < sl.need:
		r.Reason = ReasonTaint
		r.Taint = taint
	case counts.Free < need || sl.all && counts.Free < sl.need:
		r.Reason = ReasonAllocated
	case counts.Available < need || sl.all && counts.Available < sl.need:
		r.Reason = ReasonCounters
	default:
		return
	}
	if r.Reason != ReasonPoolUnusable && r.SelectorErrors > 0 && r.Reason != ReasonNoDevices &&
		(r.Reason == ReasonClassMismatch || r.Reason == ReasonSelectorMismatch) {
		r.Reason = ReasonSelectorError
	}
	if r.Message == "" {
		r.Message = describe(r, sl)
	}
	if r.Reason == ReasonNoDevices && len(view.unusable) > 0 {
		// The devices may well be in the pool that can't be used yet.
		r.Reason = ReasonPoolUnusable
		r.Message += "; " + view.unusable[0].problem()
	}
	sl.problem = r
	sl.cands = nil
}

// preferPacked orders candidates so that devices whose counter sets or
// shares are already partly used come first: allocating those keeps whole
// devices free for requests that need them.
func preferPacked(cands []cand, st *State) {
	if len(cands) < 2 {
		return
	}
	rank := func(c *cand) int {
		d := c.d
		if d.multi && st.shared[d.index] {
			return 0
		}
		for _, u := range d.counters {
			if st.counterFree[u.counter] < st.inv.counterTotals[u.counter] {
				return 0
			}
		}
		return 1
	}
	any0 := false
	for i := range cands {
		if rank(&cands[i]) == 0 {
			any0 = true
			break
		}
	}
	if !any0 {
		return
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return rank(&a) - rank(&b) })
}

func countersFree(d *device, st *State) bool {
	if d.multi && st.shared[d.index] {
		return true
	}
	for _, u := range d.counters {
		if st.counterFree[u.counter] < u.amount {
			return false
		}
	}
	return true
}

func constraintAttribute(c resourceapi.DeviceConstraint) resourceapi.FullyQualifiedName {
	if c.MatchAttribute != nil {
		return *c.MatchAttribute
	}
	return deref(c.DistinctAttribute)
}

// attributeKey interns the typed value of an attribute so constraints
// compare small integers; values of different types never compare equal.
func attributeKey(d *device, name resourceapi.FullyQualifiedName, interned map[string]int32) int32 {
	attr, ok := lookupAttribute(d, name)
	if !ok {
		return -1
	}
	var key string
	switch {
	case attr.StringValue != nil:
		key = "s" + *attr.StringValue
	case attr.IntValue != nil:
		key = fmt.Sprintf("i%d", *attr.IntValue)
	case attr.BoolValue != nil:
		key = fmt.Sprintf("b%t", *attr.BoolValue)
	case attr.VersionValue != nil:
		key = "v" + *attr.VersionValue
	default:
		return -1
	}
	id, ok := interned[key]
	if !ok {
		id = int32(len(interned))
		interned[key] = id
	}
	return id
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

func (s *search) reset() {
	s.taken = make(map[int]uint64)
	s.shares = make(map[int]int)
	s.capUsed = make(map[int][]int64)
	s.counterUsed = make(map[int]int64)
	s.picks = make([][]pick, len(s.claims))
	s.steps = 0
	s.err = nil
	for _, cs := range s.cons {
		for _, c := range cs {
			c.count = 0
			if c.used != nil {
				clear(c.used)
			}
		}
	}
}

func (s *search) run() bool { return s.group(0) }

// errBudget stops explanation searches that take too long.
var errBudget = fmt.Errorf("search budget exhausted")

func (s *search) group(gi int) bool {
	if gi == len(s.groups) {
		return true
	}
	g := s.groups[gi]
	for si, sl := range g.slots {
		if sl.problem != nil {
			continue
		}
		if s.fill(gi, sl, 0, 0) {
			g.chosen = si
			return true
		}
		if s.err != nil {
			return false
		}
	}
	return false
}

// fill picks device n of a slot among the candidates from start on; devices
// of one request are chosen in candidate order so every set is tried once.
func (s *search) fill(gi int, sl *slot, n, start int) bool {
	if n == sl.need {
		return s.group(gi + 1)
	}
	s.steps++
	if s.steps&1023 == 0 {
		if err := s.ctx.Err(); err != nil {
			s.err = err
			return false
		}
	}
	if s.budget > 0 && s.steps > s.budget {
		s.err = errBudget
		return false
	}
	if len(s.picks[sl.claim])+sl.need-n > resourceapi.AllocationResultsMaxSize {
		return false
	}
	if sl.all {
		c := &sl.cands[n]
		if !s.take(sl, c) {
			return false
		}
		if s.fill(gi, sl, n+1, 0) {
			return true
		}
		s.release(sl, c)
		return false
	}
	for i := start; i <= len(sl.cands)-(sl.need-n); i++ {
		c := &sl.cands[i]
		if !s.take(sl, c) {
			continue
		}
		if s.fill(gi, sl, n+1, i+1) {
			return true
		}
		s.release(sl, c)
		if s.err != nil {
			return false
		}
	}
	return false
}

// take allocates a candidate if nothing chosen so far conflicts with it.
func (s *search) take(sl *slot, c *cand) bool {
	d := c.d
	st := s.st
	bit := uint64(1) << sl.claim
	if !d.multi {
		held := s.taken[d.index]
		if sl.admin && held&bit != 0 || !sl.admin && (held != 0 || st.busy[d.index]) {
			return false
		}
	} else if !sl.admin && st.busy[d.index] {
		return false
	}
	consumeCounters := len(d.counters) > 0 && !(d.multi && (st.shared[d.index] || s.shares[d.index] > 0))
	if consumeCounters {
		for _, u := range d.counters {
			if st.counterFree[u.counter]-s.counterUsed[u.counter] < u.amount {
				return false
			}
		}
	}
	if d.multi && c.consume != nil {
		used := st.capUsed[d.index]
		attempt := s.capUsed[d.index]
		for i, v := range c.consume {
			total := v
			if used != nil {
				total += used[i]
			}
			if attempt != nil {
				total += attempt[i]
			}
			if total > d.caps[i].total {
				return false
			}
		}
	}
	cons := s.cons[sl.claim]
	for k, ci := range sl.cons {
		if !cons[ci].add(c.keys[k]) {
			for j := 0; j < k; j++ {
				cons[sl.cons[j]].remove(c.keys[j])
			}
			return false
		}
	}

	if !d.multi {
		s.taken[d.index] |= bit
	} else {
		s.shares[d.index]++
		if c.consume != nil {
			attempt := s.capUsed[d.index]
			if attempt == nil {
				attempt = make([]int64, len(d.caps))
				s.capUsed[d.index] = attempt
			}
			for i, v := range c.consume {
				attempt[i] += v
			}
		}
	}
	if consumeCounters {
		for _, u := range d.counters {
			s.counterUsed[u.counter] += u.amount
		}
	}
	s.picks[sl.claim] = append(s.picks[sl.claim], pick{slot: sl, cand: c})
	return true
}

// release undoes the most recent take of the slot's claim.
func (s *search) release(sl *slot, c *cand) {
	d := c.d
	st := s.st
	s.picks[sl.claim] = s.picks[sl.claim][:len(s.picks[sl.claim])-1]
	cons := s.cons[sl.claim]
	for k, ci := range sl.cons {
		cons[ci].remove(c.keys[k])
	}
	if !d.multi {
		s.taken[d.index] &^= uint64(1) << sl.claim
		if s.taken[d.index] == 0 {
			delete(s.taken, d.index)
		}
	} else {
		s.shares[d.index]--
		if c.consume != nil {
			attempt := s.capUsed[d.index]
			for i, v := range c.consume {
				attempt[i] -= v
			}
		}
	}
	consumed := len(d.counters) > 0 && !(d.multi && (st.shared[d.index] || s.shares[d.index] > 0))
	if consumed {
		for _, u := range d.counters {
			s.counterUsed[u.counter] -= u.amount
		}
	}
}

// firstLine keeps explanations on one line; CEL compile errors come with a
// multi-line excerpt of the expression.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}
