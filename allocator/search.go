package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
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

// cand is a device that passes every check of a slot that does not depend
// on other choices of the search.
type cand struct {
	d *device
	// consume is what the request takes of each device capacity, aligned
	// with device.caps; only set for devices that allow multiple
	// allocations.
	consume []int64
	// keys are the constraint attribute values, aligned with slot.cons;
	// -1 when the device lacks the attribute.
	keys []int32
}

// slotState is what a slot has on the node being searched.
type slotState struct {
	cands []cand
	need  int
	// problem explains why the slot can't be satisfied on the node, even
	// on its own; it is kept inline to spare an allocation per node.
	problem    RequestExplanation
	hasProblem bool
}

type pick struct {
	slot *slot
	cand *cand
	// counters is set when this pick consumed the device's counters: the
	// first allocation of a device, or of a shared device not yet shared.
	counters bool
}

// constraintState tracks one claim constraint during the search.
type constraintState struct {
	match bool
	// For matchAttribute: the value all devices share and how many devices
	// hold it.
	value int32
	count int
	// For distinctAttribute: the values in use.
	used []int32
	// disabled constraints accept everything; explanations use this to find
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
	if slices.Contains(c.used, key) {
		return false
	}
	c.used = append(c.used, key)
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
	if i := slices.Index(c.used, key); i >= 0 {
		c.used = slices.Delete(c.used, i, i+1)
	}
}

// search allocates a plan on one node. It is reused node after node, so
// its buffers only grow once.
type search struct {
	ctx  context.Context
	st   *State
	p    *plan
	view *nodeView

	slots  []slotState
	cons   [][]constraintState
	chosen []int // per group: index of the slot used
	picks  []pick
	// claimPicks counts the picks of each claim.
	claimPicks []int

	keyArena []int32
	capArena []int64

	scratch []int

	// The counting bound, see prepareBound.
	bound        bool
	bitOf        map[int]int // device index -> bit
	taken        []uint64
	suffixNeed   []int
	suffixSupply []uint64
	groupShared  []bool // group has candidates that allow multiple allocations

	steps  int
	budget int // 0: unlimited
	err    error
}

// errBudget stops explanation searches that take too long.
var errBudget = errors.New("search budget exhausted")

func newSearch(ctx context.Context, st *State, p *plan) *search {
	s := &search{ctx: ctx, st: st, p: p,
		slots:      make([]slotState, len(p.slots)),
		cons:       make([][]constraintState, len(p.claims)),
		chosen:     make([]int, len(p.groups)),
		claimPicks: make([]int, len(p.claims)),
	}
	for ci, specs := range p.cons {
		s.cons[ci] = make([]constraintState, len(specs))
		for k, spec := range specs {
			s.cons[ci][k].match = spec.match
		}
	}
	return s
}

// Allocate tries to allocate all claims of one pod on the node. Claims that
// are already allocated must not be passed. The error is only set when the
// search could not run (cancelled context, too many claims); "doesn't fit"
// is a Result with an Explanation. To check one pod on many nodes, plan it
// once with NewCheck.
func (a *Allocator) Allocate(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim, node *corev1.Node) (Result, error) {
	if len(claims) > 64 {
		return Result{Node: node.Name}, errTooManyClaims(len(claims))
	}
	c := Check{a: a, s: newSearch(ctx, st, newPlan(st.inv, claims))}
	return c.Allocate(node)
}

func errTooManyClaims(n int) error {
	return fmt.Errorf("%d claims, at most 64 can be allocated together", n)
}

// Check is one pod's claims planned once (classes resolved, selectors
// compiled, requests flattened), to be checked node after node against one
// State, as SelectNode does. Fits only answers whether the claims fit on a
// node; Allocate also builds the AllocationResults, which is most of the
// cost of a node that fits, so call it for the node chosen. A Check is
// valid while its State is and must not be used concurrently.
type Check struct {
	a *Allocator
	s *search
}

// NewCheck plans the claims of one pod for checking nodes. Claims that are
// already allocated must not be passed; at most 64 claims can be allocated
// together.
func (a *Allocator) NewCheck(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim) (*Check, error) {
	if len(claims) > 64 {
		return nil, errTooManyClaims(len(claims))
	}
	return &Check{a: a, s: newSearch(ctx, st, newPlan(st.inv, claims))}, nil
}

// Fits reports whether the claims fit on the node, and when they do not,
// why. The error is only set when the search could not run (cancelled
// context).
func (c *Check) Fits(node *corev1.Node) (bool, *Explanation, error) {
	return c.s.onNode(node)
}

// Allocate is Allocator.Allocate with the plan of the Check.
func (c *Check) Allocate(node *corev1.Node) (Result, error) {
	ok, expl, err := c.s.onNode(node)
	switch {
	case err != nil:
		return Result{Node: node.Name}, err
	case !ok:
		return Result{Node: node.Name, Explanation: expl}, nil
	}
	return Result{Node: node.Name, Allocations: c.a.results(c.s, node)}, nil
}

// onNode runs the whole allocation on one node. On success the picks hold
// the solution.
func (s *search) onNode(node *corev1.Node) (bool, *Explanation, error) {
	return s.onView(node, s.st.inv.view(node))
}

// onView is onNode with the node's view looked up already.
func (s *search) onView(node *corev1.Node, view *nodeView) (bool, *Explanation, error) {
	s.view = view
	var expl *Explanation
	if len(s.p.problems) > 0 {
		expl = &Explanation{Requests: slices.Clone(s.p.problems)}
		if err := s.ctx.Err(); err != nil {
			return false, nil, err
		}
	} else {
		expl = s.prepare()
		if err := s.ctx.Err(); err != nil {
			return false, nil, err
		}
		if expl == nil {
			s.reset()
			if s.run() {
				return true, nil, nil
			}
			if s.err != nil {
				return false, nil, s.err
			}
			expl = s.explainSearchFailure()
		}
	}
	expl.Node = node.Name
	for _, p := range s.view.unusable {
		expl.UnusablePools = append(expl.UnusablePools, p.problem())
	}
	return false, expl, nil
}

// prepare computes the candidates of every slot on the node and checks
// what can be checked without searching. It returns an explanation if the
// claims can't fit.
func (s *search) prepare() *Explanation {
	s.keyArena = s.keyArena[:0]
	s.capArena = s.capArena[:0]
	var expl *Explanation
	for _, g := range s.p.groups {
		usable := false
		for _, sl := range g.slots {
			s.candidates(sl)
			usable = usable || !s.slots[sl.id].hasProblem
		}
		if !usable {
			for _, sl := range g.slots {
				expl = addReason(expl, &s.slots[sl.id].problem)
			}
		}
	}
	if expl != nil {
		return expl
	}
	if expl = s.tooManyResults(); expl != nil {
		return expl
	}
	for ci := range s.p.claims {
		for k := range s.p.cons[ci] {
			if s.constraintHopeless(ci, k) {
				r := s.p.constraintExplanation(ci, k)
				expl = addReason(expl, &r)
			}
		}
	}
	if expl == nil {
		s.prepareBound()
	}
	return expl
}

// tooManyResults explains claims that need more devices on the node than
// one allocation can hold: the plan counts a request in allocationMode All
// as one device, here it counts every matching device of the node.
func (s *search) tooManyResults() *Explanation {
	var expl *Explanation
	// The groups of a claim are contiguous.
	for start := 0; start < len(s.p.groups); {
		ci := s.p.groups[start].claim
		end, n := start, 0
		for ; end < len(s.p.groups) && s.p.groups[end].claim == ci; end++ {
			least := -1
			for _, sl := range s.p.groups[end].slots {
				if ss := &s.slots[sl.id]; !ss.hasProblem && (least < 0 || ss.need < least) {
					least = ss.need
				}
			}
			n += max(least, 0)
		}
		if n > resourceapi.AllocationResultsMaxSize {
			var all []string
			for _, g := range s.p.groups[start:end] {
				for _, sl := range g.slots {
					if ss := &s.slots[sl.id]; sl.all && !ss.hasProblem {
						all = append(all, fmt.Sprintf("%s: %d", sl.name, ss.need))
					}
				}
			}
			detail := fmt.Sprintf("claim needs at least %d devices on the node, but an allocation holds at most %d", n, resourceapi.AllocationResultsMaxSize)
			if len(all) > 0 {
				detail += " (allocationMode All " + strings.Join(all, ", ") + ")"
			}
			expl = addReason(expl, &RequestExplanation{Claim: s.p.claimNames[ci], Reason: ReasonTooManyResults, Needed: n, Constraint: -1, Detail: detail})
		}
		start = end
	}
	return expl
}

// prepareBound sets up the counting bound of the search: the requests
// still to be allocated need at least so many devices, and exclusive
// devices can't be shared between them. Without it, a pod that asks for
// more devices than the node has would make the search try every
// combination before giving up.
func (s *search) prepareBound() {
	groups := s.p.groups
	s.bound = false
	if len(groups) < 2 {
		return
	}
	// Number the exclusive candidates of the non-admin alternatives.
	clear(s.bitOf)
	if s.bitOf == nil {
		s.bitOf = make(map[int]int)
	}
	for _, g := range groups {
		for _, sl := range g.slots {
			if sl.admin || s.slots[sl.id].hasProblem {
				continue
			}
			for _, c := range s.slots[sl.id].cands {
				if _, ok := s.bitOf[c.d.index]; !ok && !c.d.multi {
					s.bitOf[c.d.index] = len(s.bitOf)
				}
			}
		}
	}
	words := (len(s.bitOf) + 63) / 64
	s.taken = resize(s.taken, words)
	clear(s.taken)
	s.suffixNeed = resize(s.suffixNeed, len(groups)+1)
	s.suffixSupply = resize(s.suffixSupply, (len(groups)+1)*words)
	clear(s.suffixSupply)
	s.suffixNeed[len(groups)] = 0
	s.groupShared = resize(s.groupShared, len(groups))
	for gi := len(groups) - 1; gi >= 0; gi-- {
		supply := s.suffixSupply[gi*words : (gi+1)*words]
		copy(supply, s.suffixSupply[(gi+1)*words:(gi+2)*words])
		s.groupShared[gi] = false
		least := -1
		for _, sl := range groups[gi].slots {
			ss := &s.slots[sl.id]
			if ss.hasProblem {
				continue
			}
			// A device that allows multiple allocations can serve every
			// request once; the rest must be exclusive devices.
			n := ss.need
			for _, c := range ss.cands {
				if c.d.multi {
					n--
					s.groupShared[gi] = true
				} else if !sl.admin {
					b := s.bitOf[c.d.index]
					supply[b/64] |= 1 << (b % 64)
				}
			}
			if sl.admin {
				n = 0
			}
			n = max(n, 0)
			if least < 0 || n < least {
				least = n
			}
		}
		s.suffixNeed[gi] = s.suffixNeed[gi+1] + max(least, 0)
	}
	s.bound = true
}

func resize[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// hopelessWithin applies the counting bound while group gi still needs
// more devices: devices that allow multiple allocations may serve it,
// so it only counts when there are none.
func (s *search) hopelessWithin(gi, more int) bool {
	if !s.bound || s.groupShared[gi] {
		return false
	}
	words := len(s.taken)
	supply := s.suffixSupply[gi*words : (gi+1)*words]
	free := 0
	for w, word := range supply {
		free += bits.OnesCount64(word &^ s.taken[w])
	}
	return free < s.suffixNeed[gi+1]+more
}

// hopeless applies the counting bound before allocating group gi.
func (s *search) hopeless(gi int) bool {
	if !s.bound {
		return false
	}
	words := len(s.taken)
	supply := s.suffixSupply[gi*words : (gi+1)*words]
	free := 0
	for w, word := range supply {
		free += bits.OnesCount64(word &^ s.taken[w])
	}
	return free < s.suffixNeed[gi]
}

// candidates filters the node's devices for a slot, counting how many
// survive each check so that a failure can say which check removed them.
func (s *search) candidates(sl *slot) {
	ss := &s.slots[sl.id]
	ss.cands = ss.cands[:0]
	ss.hasProblem = false
	if sl.problem != nil {
		ss.problem, ss.hasProblem = *sl.problem, true
		return
	}
	if !sl.all && s.quickCandidates(sl, ss) {
		return
	}
	t := filterTally{rejectedBy: -1, exhausted: -1}
	t.counts.OnNode = len(s.view.devices)
	for _, d := range s.view.devices {
		s.filterDevice(sl, ss, d, &t)
	}
	if s.ctx.Err() != nil {
		return
	}

	need := sl.count
	if sl.all {
		ss.need = len(ss.cands)
		need = 1
	} else {
		ss.need = sl.count
		preferPacked(ss.cands, s.st)
	}
	reason, failed := s.candidatesReason(sl, ss, &t, need)
	if !failed {
		return
	}
	ss.problem = s.candidatesProblem(sl, &t, reason)
	if reason == ReasonTooManyResults {
		ss.problem.Needed = ss.need
		ss.problem.Detail = fmt.Sprintf("allocationMode All needs all %d matching devices, but an allocation holds at most %d", ss.need, resourceapi.AllocationResultsMaxSize)
	}
	ss.hasProblem = true
	ss.cands = ss.cands[:0]
}

// filterTally is what the counting pass of candidates remembers about the
// devices it filtered out, to explain a failure.
type filterTally struct {
	counts DeviceCounts
	// rejectedBy is the first selector that rejected a device (-1: none),
	// rejectedCount how many devices it rejected.
	rejectedBy, rejectedCount int
	// evalErr is the first selector evaluation error, on evalErrDevice;
	// evalErrCount counts them all.
	evalErr       error
	evalErrDevice *device
	evalErrCount  int
	// firstTaint is the first taint not tolerated.
	firstTaint *resourceapi.DeviceTaint
	// capacityUsedUp counts devices of an "All" request whose capacity
	// others use up.
	capacityUsedUp int
	// exhausted is the first shared counter found used up (-1: none).
	exhausted int
}

// filterDevice runs one device through the checks of a slot, in the order
// an explanation reports them, and makes it a candidate if it passes.
func (s *search) filterDevice(sl *slot, ss *slotState, d *device, t *filterTally) {
	if sl.numClass == 0 {
		t.counts.MatchedClass++
	}
	if !s.matchSelectors(sl, d, t) {
		return
	}
	t.counts.MatchedSelectors++

	// "All" takes every device that could hold the request if it were
	// unused; one whose capacity is used up by others then fails the
	// request rather than being left out.
	consume, fits := s.capacityFit(sl.capacity, d, !sl.all)
	if !fits {
		return
	}
	if sl.all && d.multi && consume != nil {
		if _, fitsNow := s.capacityFit(sl.capacity, d, true); !fitsNow {
			t.capacityUsedUp++
			ss.cands = append(ss.cands, cand{d: d, consume: consume})
			return
		}
	}
	t.counts.WithCapacity++

	c := cand{d: d, consume: consume}
	if len(sl.cons) > 0 {
		consSpecs := s.p.cons[sl.claim]
		start := len(s.keyArena)
		for _, k := range sl.cons {
			spec := &consSpecs[k]
			s.keyArena = append(s.keyArena, s.st.inv.attributeKey(spec.values, d, spec.attribute))
		}
		c.keys = s.keyArena[start:len(s.keyArena):len(s.keyArena)]
	}
	// In "All" mode every matching device is needed, so the remaining
	// checks decide whether the request can succeed, not which devices
	// are candidates.
	if taint := untolerated(d.taints, sl.tolerations); taint != nil {
		if t.firstTaint == nil {
			t.firstTaint = taint
		}
		if sl.all {
			ss.cands = append(ss.cands, c)
		}
		return
	}
	t.counts.Tolerated++
	if s.st.busy[d.index] && !sl.admin {
		if sl.all {
			ss.cands = append(ss.cands, c)
		}
		return
	}
	t.counts.Free++
	if !countersFree(d, s.st) {
		if t.exhausted < 0 {
			t.exhausted = exhaustedCounter(d, s.st)
		}
		if sl.all {
			ss.cands = append(ss.cands, c)
		}
		return
	}
	t.counts.Available++
	ss.cands = append(ss.cands, c)
}

// matchSelectors evaluates the class's and the request's selectors on a
// device, counting class matches, rejections and evaluation errors.
func (s *search) matchSelectors(sl *slot, d *device, t *filterTally) bool {
	for i, e := range sl.selectors {
		ok, err := e.match(s.ctx, d)
		if err != nil {
			t.evalErrCount++
			if t.evalErr == nil {
				t.evalErr, t.evalErrDevice = err, d
			}
		}
		if !ok {
			if t.rejectedBy < 0 || i == t.rejectedBy {
				t.rejectedBy = i
				t.rejectedCount++
			}
			return false
		}
		if i+1 == sl.numClass {
			t.counts.MatchedClass++
		}
	}
	return true
}

// candidatesReason names the first check that left fewer devices than
// the slot needs; false when there are enough candidates.
func (s *search) candidatesReason(sl *slot, ss *slotState, t *filterTally, need int) (Reason, bool) {
	counts := &t.counts
	var reason Reason
	switch {
	case sl.all && len(s.view.unusable) > 0:
		reason = ReasonPoolUnusable
	case counts.OnNode < need:
		reason = ReasonNoDevices
		if len(s.view.unusable) > 0 {
			// The devices may well be in the pool that can't be used yet.
			reason = ReasonPoolUnusable
		}
	case counts.MatchedClass < need:
		reason = ReasonClassMismatch
	case counts.MatchedSelectors < need:
		reason = ReasonSelectorMismatch
	case counts.WithCapacity < need || t.capacityUsedUp > 0:
		reason = ReasonCapacity
	case counts.Tolerated < max(need, ss.need):
		reason = ReasonTaint
	case counts.Free < max(need, ss.need):
		reason = ReasonAllocated
	case counts.Available < max(need, ss.need):
		reason = ReasonCounters
	case sl.all && ss.need > resourceapi.AllocationResultsMaxSize:
		reason = ReasonTooManyResults
	default:
		return "", false
	}
	if t.evalErrCount > 0 && (reason == ReasonClassMismatch || reason == ReasonSelectorMismatch) {
		reason = ReasonSelectorError
	}
	return reason, true
}

// candidatesProblem explains why a slot has too few candidates.
func (s *search) candidatesProblem(sl *slot, t *filterTally, reason Reason) RequestExplanation {
	r := RequestExplanation{
		Claim: s.p.claimNames[sl.claim], Request: sl.name, Class: sl.class.Name, Reason: reason,
		Needed: sl.count, AllDevices: sl.all, Counts: t.counts, Taint: t.firstTaint, Constraint: -1,
	}
	if sl.all {
		r.Needed = 0
	}
	if t.rejectedBy >= 0 {
		r.Selector, r.SelectorRejected = sl.selectors[t.rejectedBy].expression, t.rejectedCount
	}
	if t.evalErr != nil {
		r.SelectorError = fmt.Sprintf("device %s: %v", t.evalErrDevice.id, t.evalErr)
		r.SelectorErrors = t.evalErrCount
	}
	if reason == ReasonPoolUnusable {
		r.Pool = s.view.unusable[0].problem()
	}
	if reason == ReasonCounters && t.exhausted >= 0 {
		r.Counter = s.st.inv.counterNames[t.exhausted]
	}
	return r
}

// quickCandidates collects the candidates of a slot checking the cheap,
// per-pod conditions (allocated, taints, counters) before the selectors, so
// that selectors are not evaluated for devices that can't be used anyway.
// It reports false, leaving the counting pass of candidates to explain,
// when there are not enough candidates.
func (s *search) quickCandidates(sl *slot, ss *slotState) bool {
	st := s.st
	keyStart, capStart := len(s.keyArena), len(s.capArena)
	consSpecs := s.p.cons[sl.claim]
	// With nothing that could make two candidates conflict, the first ones
	// found are the answer; evaluating selectors on the rest would only
	// cost time.
	enough := len(s.view.devices)
	if s.p.single && s.view.plain {
		enough = sl.count
	}
	for _, d := range s.view.devices {
		if len(ss.cands) == enough {
			break
		}
		if st.busy[d.index] && !sl.admin || !countersFree(d, st) || untolerated(d.taints, sl.tolerations) != nil {
			continue
		}
		matched := true
		for _, e := range sl.selectors {
			if ok, _ := e.match(s.ctx, d); !ok {
				matched = false
				break
			}
		}
		if !matched {
			continue
		}
		consume, fits := s.capacityFit(sl.capacity, d, true)
		if !fits {
			continue
		}
		c := cand{d: d, consume: consume}
		if len(sl.cons) > 0 {
			start := len(s.keyArena)
			for _, k := range sl.cons {
				spec := &consSpecs[k]
				s.keyArena = append(s.keyArena, s.st.inv.attributeKey(spec.values, d, spec.attribute))
			}
			c.keys = s.keyArena[start:len(s.keyArena):len(s.keyArena)]
		}
		ss.cands = append(ss.cands, c)
	}
	if len(ss.cands) < sl.count {
		ss.cands = ss.cands[:0]
		s.keyArena, s.capArena = s.keyArena[:keyStart], s.capArena[:capStart]
		return false
	}
	ss.need = sl.count
	preferPacked(ss.cands, st)
	return true
}

// capacityFit computes what a request consumes of each device capacity,
// after rounding by the request policy, and whether that fits into the
// device (withUsed: into what the existing allocations leave). The
// consumption is only returned for devices that allow multiple
// allocations: an exclusive device needs no accounting.
func (s *search) capacityFit(req *resourceapi.CapacityRequirements, d *device, withUsed bool) ([]int64, bool) {
	if len(d.caps) == 0 {
		return nil, req == nil || len(req.Requests) == 0
	}
	if len(d.caps) > 64 {
		// Validation allows at most 32 capacities per device.
		return nil, false
	}
	var requested [64]int64
	var asked uint64
	if req != nil {
		for name, q := range req.Requests {
			i := capacityIndex(d, name)
			if i < 0 || asked&(1<<i) != 0 {
				// Unknown capacity, or the same one named twice.
				return nil, false
			}
			asked |= 1 << i
			requested[i] = q.MilliValue()
		}
	}
	var used []int64
	if d.multi && withUsed {
		used = s.st.capUsed[d.index]
	}
	start := len(s.capArena)
	for i := range d.caps {
		c := &d.caps[i]
		v, ok := consumedQuantity(asked&(1<<i) != 0, requested[i], c)
		total := v
		if used != nil {
			total += used[i]
		}
		if !ok || total > c.total {
			s.capArena = s.capArena[:start]
			return nil, false
		}
		if d.multi {
			s.capArena = append(s.capArena, v)
		}
	}
	if !d.multi {
		return nil, true
	}
	return s.capArena[start:len(s.capArena):len(s.capArena)], true
}

// constraintHopeless checks a constraint against the candidates alone: a
// matchAttribute constraint needs one value that enough candidates of
// every request share, a distinctAttribute constraint enough different
// values. Requests with alternatives are left to the search.
func (s *search) constraintHopeless(ci, k int) bool {
	spec := s.p.cons[ci][k]
	var slotsBuf [8]*slot
	slotsOf := slotsBuf[:0]
	for _, g := range s.p.groups {
		if g.claim != ci {
			continue
		}
		if len(g.slots) != 1 {
			return false
		}
		sl := g.slots[0]
		pos := slices.Index(sl.cons, k)
		if pos >= 0 {
			slotsOf = append(slotsOf, sl)
		}
	}
	if len(slotsOf) == 0 {
		return false
	}
	if spec.match {
		return s.matchHopeless(slotsOf, k)
	}
	return s.distinctHopeless(slotsOf, k)
}

// matchHopeless: no value of the first request's candidates is shared by
// enough candidates of every request of matchAttribute constraint k.
func (s *search) matchHopeless(slotsOf []*slot, k int) bool {
	// Try every value of the first request's candidates.
	first := slotsOf[0]
	pos0 := slices.Index(first.cons, k)
	for _, c := range s.slots[first.id].cands {
		v := c.keys[pos0]
		if v < 0 {
			continue
		}
		// Every request needs enough devices with the value, and
		// together they need that many different exclusive devices.
		ok := true
		needed, shared := 0, false
		s.scratch = s.scratch[:0]
		for _, sl := range slotsOf {
			pos := slices.Index(sl.cons, k)
			n := 0
			for _, c2 := range s.slots[sl.id].cands {
				if c2.keys[pos] == v {
					n++
					if c2.d.multi {
						shared = true
					} else {
						s.scratch = append(s.scratch, c2.d.index)
					}
				}
			}
			if n < s.slots[sl.id].need {
				ok = false
				break
			}
			needed += s.slots[sl.id].need
		}
		if ok && !shared && len(slotsOf) > 1 {
			slices.Sort(s.scratch)
			ok = len(slices.Compact(s.scratch)) >= needed
		}
		if ok {
			return false
		}
	}
	return true
}

// distinctHopeless: the candidates of the requests of distinctAttribute
// constraint k have fewer different values than the requests need.
func (s *search) distinctHopeless(slotsOf []*slot, k int) bool {
	var valuesBuf, ownBuf [16]int32
	values := valuesBuf[:0]
	needed := 0
	hopeless := false
	for _, sl := range slotsOf {
		pos := slices.Index(sl.cons, k)
		own := ownBuf[:0]
		for _, c := range s.slots[sl.id].cands {
			if v := c.keys[pos]; v >= 0 && !slices.Contains(own, v) {
				own = append(own, v)
				if !slices.Contains(values, v) {
					values = append(values, v)
				}
			}
		}
		if len(own) < s.slots[sl.id].need {
			hopeless = true
		}
		needed += s.slots[sl.id].need
	}
	return hopeless || len(values) < needed
}

func (p *plan) constraintExplanation(ci, k int) RequestExplanation {
	spec := p.cons[ci][k]
	return RequestExplanation{
		Claim: p.claimNames[ci], Reason: ReasonConstraint, Constraint: k,
		ConstraintAttribute: string(spec.attribute), ConstraintMatch: spec.match, ConstraintRequests: spec.requests,
	}
}

// addReason appends to an explanation, allocating the explanation and room
// for one reason at once: most failures have exactly one.
func addReason(e *Explanation, r *RequestExplanation) *Explanation {
	if e == nil {
		block := &struct {
			e Explanation
			r [1]RequestExplanation
		}{}
		block.r[0] = *r
		block.e.Requests = block.r[:1:1]
		return &block.e
	}
	e.Requests = append(e.Requests, *r)
	return e
}

// preferPacked orders candidates so that allocating them keeps whole
// devices free: first devices whose counter sets or shares are already
// partly used, then the ones that take the smallest part of their counter
// sets (a partition before the whole device). The order only chooses among
// solutions; the search still tries every set.
func preferPacked(cands []cand, st *State) {
	if len(cands) < 2 {
		return
	}
	partitioned := false
	for i := range cands {
		if len(cands[i].d.counters) > 0 || cands[i].d.multi && st.shared[cands[i].d.index] {
			partitioned = true
			break
		}
	}
	if !partitioned {
		return
	}
	type key struct {
		rank int
		size float64
	}
	keyOf := func(c *cand) key {
		d := c.d
		if d.multi && st.shared[d.index] {
			return key{0, 0}
		}
		k := key{rank: 1}
		for _, u := range d.counters {
			total := st.inv.counterTotals[u.counter]
			if st.counterFree[u.counter] < total {
				k.rank = 0
			}
			if total > 0 {
				k.size += float64(u.amount) / float64(total)
			}
		}
		return k
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		ka, kb := keyOf(&a), keyOf(&b)
		if ka.rank != kb.rank {
			return ka.rank - kb.rank
		}
		switch {
		case ka.size < kb.size:
			return -1
		case ka.size > kb.size:
			return 1
		}
		return 0
	})
}

// exhaustedCounter is the first counter the device needs more of than is
// left, -1 if none.
func exhaustedCounter(d *device, st *State) int {
	for _, u := range d.counters {
		if st.counterFree[u.counter] < u.amount {
			return u.counter
		}
	}
	return -1
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

func (s *search) reset() {
	clear(s.taken)
	s.picks = s.picks[:0]
	clear(s.claimPicks)
	s.steps = 0
	s.err = nil
	for _, cs := range s.cons {
		for i := range cs {
			cs[i].count = 0
			cs[i].used = cs[i].used[:0]
		}
	}
}

func (s *search) run() bool { return s.group(0) }

func (s *search) group(gi int) bool {
	if gi == len(s.p.groups) {
		return true
	}
	if s.hopeless(gi) {
		return false
	}
	g := s.p.groups[gi]
	for si, sl := range g.slots {
		if s.slots[sl.id].hasProblem {
			continue
		}
		if s.fill(gi, sl, &s.slots[sl.id], 0, 0) {
			s.chosen[gi] = si
			return true
		}
		if s.err != nil {
			return false
		}
	}
	return false
}

// fill picks device n of a slot among the candidates from start on; the
// devices of one request are chosen in candidate order so that every set
// is tried once, not every permutation.
func (s *search) fill(gi int, sl *slot, ss *slotState, n, start int) bool {
	if n == ss.need {
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
	if s.claimPicks[sl.claim]+ss.need-n > resourceapi.AllocationResultsMaxSize {
		return false
	}
	if n > 0 && !sl.admin && s.hopelessWithin(gi, ss.need-n) {
		return false
	}
	if sl.all {
		c := &ss.cands[n]
		if !s.take(sl, c) {
			return false
		}
		if s.fill(gi, sl, ss, n+1, 0) {
			return true
		}
		s.release(sl)
		return false
	}
	for i := start; i <= len(ss.cands)-(ss.need-n); i++ {
		c := &ss.cands[i]
		if !s.take(sl, c) {
			continue
		}
		if s.fill(gi, sl, ss, n+1, i+1) {
			return true
		}
		s.release(sl)
		if s.err != nil {
			return false
		}
	}
	return false
}

// take allocates a candidate if nothing chosen so far conflicts with it.
// What the current attempt holds is derived from the picks: they are few,
// and scanning them is cheaper than maintaining maps.
func (s *search) take(sl *slot, c *cand) bool {
	d := c.d
	st := s.st
	shares := 0
	for i := range s.picks {
		p := &s.picks[i]
		if p.cand.d != d {
			continue
		}
		if !d.multi && (!sl.admin || p.slot.claim == sl.claim) {
			return false
		}
		shares++
	}
	if !sl.admin && st.busy[d.index] {
		return false
	}
	consumeCounters := len(d.counters) > 0 && !(d.multi && (st.shared[d.index] || shares > 0))
	if consumeCounters {
		for _, u := range d.counters {
			if st.counterFree[u.counter]-s.counterUsed(u.counter) < u.amount {
				return false
			}
		}
	}
	if d.multi && c.consume != nil {
		used := st.capUsed[d.index]
		for i, v := range c.consume {
			total := v
			if used != nil {
				total += used[i]
			}
			if shares > 0 {
				for j := range s.picks {
					if p := &s.picks[j]; p.cand.d == d && p.cand.consume != nil {
						total += p.cand.consume[i]
					}
				}
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
	s.picks = append(s.picks, pick{slot: sl, cand: c, counters: consumeCounters})
	s.claimPicks[sl.claim]++
	if s.bound && !d.multi {
		if b, ok := s.bitOf[d.index]; ok {
			s.taken[b/64] |= 1 << (b % 64)
		}
	}
	return true
}

// counterUsed sums what the current attempt consumes of one counter.
func (s *search) counterUsed(counter int) int64 {
	var sum int64
	for i := range s.picks {
		p := &s.picks[i]
		if !p.counters {
			continue
		}
		for _, u := range p.cand.d.counters {
			if u.counter == counter {
				sum += u.amount
			}
		}
	}
	return sum
}

// release undoes the most recent take, which was for the slot.
func (s *search) release(sl *slot) {
	last := s.picks[len(s.picks)-1]
	s.picks = s.picks[:len(s.picks)-1]
	s.claimPicks[sl.claim]--
	cons := s.cons[sl.claim]
	for k, ci := range sl.cons {
		cons[ci].remove(last.cand.keys[k])
	}
	if d := last.cand.d; s.bound && !d.multi {
		if b, ok := s.bitOf[d.index]; ok && !s.holds(d) {
			s.taken[b/64] &^= 1 << (b % 64)
		}
	}
}

// holds reports whether some pick still holds the device; admin access
// lets several claims hold one.
func (s *search) holds(d *device) bool {
	for i := range s.picks {
		if s.picks[i].cand.d == d {
			return true
		}
	}
	return false
}

// explainSearchFailure is called when every request can be satisfied on
// its own but not all together. If the claims fit without their
// constraints, a constraint is to blame.
func (s *search) explainSearchFailure() *Explanation {
	const budget = 100000
	var expl *Explanation
	numConstraints := 0
	for _, cs := range s.cons {
		numConstraints += len(cs)
	}
	setAll := func(disabled bool) {
		for _, cs := range s.cons {
			for i := range cs {
				cs[i].disabled = disabled
			}
		}
	}
	try := func() (ok, sure bool) {
		s.reset()
		s.budget = budget
		ok = s.run()
		sure = s.err == nil
		s.budget = 0
		s.err = nil
		return ok, sure
	}
	if numConstraints > 0 {
		setAll(true)
		ok, sure := try()
		if ok && sure {
			for ci, cs := range s.cons {
				for k := range cs {
					if numConstraints == 1 {
						setAll(false)
						r := s.p.constraintExplanation(ci, k)
						return addReason(nil, &r)
					}
					cs[k].disabled = false
					ok, sure := try()
					cs[k].disabled = true
					if !ok && sure {
						setAll(false)
						r := s.p.constraintExplanation(ci, k)
						return addReason(nil, &r)
					}
				}
			}
			setAll(false)
			return addReason(nil, &RequestExplanation{Reason: ReasonConstraint, Constraint: -1})
		}
		setAll(false)
	}
	for _, g := range s.p.groups {
		sl := g.slots[s.chosenOrFirstUsable(g)]
		ss := &s.slots[sl.id]
		expl = addReason(expl, &RequestExplanation{
			Claim: s.p.claimNames[g.claim], Request: sl.name, Class: sl.class.Name, Reason: ReasonConflict,
			Needed: ss.need, Constraint: -1, Counts: DeviceCounts{Available: len(ss.cands)},
		})
	}
	return expl
}

// chosenOrFirstUsable is the alternative of a group to report on.
func (s *search) chosenOrFirstUsable(g *group) int {
	for i, sl := range g.slots {
		if !s.slots[sl.id].hasProblem {
			return i
		}
	}
	return 0
}
