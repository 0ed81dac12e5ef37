package allocator

import (
	"fmt"
	"strings"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Reason is a machine-readable cause of a failed allocation.
type Reason string

const (
	ReasonClassNotFound    Reason = "ClassNotFound"
	ReasonInvalidRequest   Reason = "InvalidRequest"
	ReasonSelectorInvalid  Reason = "SelectorInvalid"
	ReasonNoDevices        Reason = "NoDevices"
	ReasonClassMismatch    Reason = "ClassSelectorMismatch"
	ReasonSelectorMismatch Reason = "SelectorMismatch"
	ReasonSelectorError    Reason = "SelectorError"
	ReasonCapacity         Reason = "InsufficientCapacity"
	ReasonTaint            Reason = "TaintNotTolerated"
	ReasonAllocated        Reason = "DevicesAllocated"
	ReasonCounters         Reason = "CountersExhausted"
	ReasonPoolUnusable     Reason = "PoolUnusable"
	ReasonConstraint       Reason = "ConstraintUnsatisfiable"
	ReasonConflict         Reason = "RequestsConflict"
	ReasonTooManyResults   Reason = "TooManyResults"
)

// DeviceCounts says how many devices on the node survived each check, in
// the order the checks are applied.
type DeviceCounts struct {
	OnNode           int // in usable pools reachable from the node
	MatchedClass     int // and matching the class selectors
	MatchedSelectors int // and matching the request selectors
	WithCapacity     int // and with enough capacity for the request
	Tolerated        int // and with every NoSchedule/NoExecute taint tolerated
	Free             int // and not allocated (or admin access)
	Available        int // and with enough shared counters left
}

// RequestExplanation is why one request (or subrequest) cannot be
// allocated on the node.
type RequestExplanation struct {
	// Claim is namespace/name of the claim.
	Claim string
	// Request is "req" or "req/sub"; empty for problems of the whole claim.
	Request string
	Reason  Reason
	Message string
	Needed  int
	Counts  DeviceCounts
	// Selector is the first selector that rejected devices, and how many.
	Selector         string
	SelectorRejected int
	// SelectorError is the first evaluation error, SelectorErrors how many
	// devices failed evaluation (and thus did not match).
	SelectorError  string
	SelectorErrors int
	// Taint is the first taint that was not tolerated.
	Taint *resourceapi.DeviceTaint
	// Constraint is the index of the unsatisfiable claim constraint, -1 if none.
	Constraint int
}

// Explanation is why a pod's claims don't fit a node.
type Explanation struct {
	Node     string
	Requests []RequestExplanation
	// UnusablePools are pools reachable from the node that could not be
	// used (incomplete or invalid); their devices were not considered.
	UnusablePools []string
}

// Summary is a one-line description for events and conditions.
func (e *Explanation) Summary() string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: ", e.Node)
	for i, r := range e.Requests {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case r.Request != "":
			fmt.Fprintf(&b, "claim %s request %s: %s", r.Claim, r.Request, r.Message)
		case r.Claim != "":
			fmt.Fprintf(&b, "claim %s: %s", r.Claim, r.Message)
		default:
			b.WriteString(r.Message)
		}
	}
	if len(e.UnusablePools) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(e.UnusablePools, ", "))
	}
	return b.String()
}

func (e *Explanation) String() string { return e.Summary() }

func claimKey(c *resourceapi.ResourceClaim) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// describe writes the message of a request that fails on its own.
func describe(r *RequestExplanation, sl *slot) string {
	c := r.Counts
	need := "one device"
	if sl.all {
		need = "all matching devices"
	} else if sl.need > 1 {
		need = fmt.Sprintf("%d devices", sl.need)
	}
	className := ""
	if sl.class != nil {
		className = sl.class.Name
	}
	switch r.Reason {
	case ReasonNoDevices:
		return fmt.Sprintf("needs %s of class %s, but the node has only %d usable devices", need, className, c.OnNode)
	case ReasonClassMismatch:
		return fmt.Sprintf("needs %s of class %s, but only %d of %d devices on the node match the class (selector %q rejected %d)", need, className, c.MatchedClass, c.OnNode, r.Selector, r.SelectorRejected)
	case ReasonSelectorMismatch:
		return fmt.Sprintf("needs %s, %d devices match class %s but selector %q rejected %d of them", need, c.MatchedClass, className, r.Selector, r.SelectorRejected)
	case ReasonSelectorError:
		return fmt.Sprintf("needs %s, only %d of %d devices match class %s and the selectors; evaluation failed on %d devices: %s", need, c.MatchedSelectors, c.OnNode, className, r.SelectorErrors, r.SelectorError)
	case ReasonCapacity:
		return fmt.Sprintf("needs %s, %d devices match but only %d have enough capacity left for the request", need, c.MatchedSelectors, c.WithCapacity)
	case ReasonTaint:
		taint := ""
		if r.Taint != nil {
			taint = fmt.Sprintf(" %s=%s:%s", r.Taint.Key, r.Taint.Value, r.Taint.Effect)
		}
		return fmt.Sprintf("needs %s, %d devices match but %d are tainted (taint%s not tolerated)", need, c.WithCapacity, c.WithCapacity-c.Tolerated, taint)
	case ReasonAllocated:
		return fmt.Sprintf("needs %s, %d devices match but %d of them are already allocated", need, c.Tolerated, c.Tolerated-c.Free)
	case ReasonCounters:
		return fmt.Sprintf("needs %s, %d matching devices are free but the shared counters of %d of them are used up by other partitions", need, c.Free, c.Free-c.Available)
	}
	return string(r.Reason)
}

// explainSearchFailure is called when every request can be satisfied on
// its own but not all together. It checks whether the claims would fit
// without their constraints, and if so, which constraint is to blame.
func (s *search) explainSearchFailure() *Explanation {
	const budget = 200000
	expl := &Explanation{}
	hasConstraints := false
	for _, cs := range s.cons {
		hasConstraints = hasConstraints || len(cs) > 0
	}
	setAll := func(disabled bool) {
		for _, cs := range s.cons {
			for _, c := range cs {
				c.disabled = disabled
			}
		}
	}
	try := func() (ok, sure bool) {
		s.reset()
		s.budget = budget
		ok = s.run()
		sure = s.err == nil
		s.budget = 0
		return ok, sure
	}
	if hasConstraints {
		setAll(true)
		ok, sure := try()
		if ok && sure {
			for ci, cs := range s.cons {
				for k, c := range cs {
					c.disabled = false
					ok, sure := try()
					c.disabled = true
					if !ok && sure {
						setAll(false)
						spec := s.claims[ci].Spec.Devices.Constraints[k]
						expl.Requests = append(expl.Requests, RequestExplanation{
							Claim:      claimKey(s.claims[ci]),
							Request:    strings.Join(spec.Requests, ","),
							Reason:     ReasonConstraint,
							Constraint: k,
							Message:    fmt.Sprintf("constraint #%d (%s) cannot be satisfied by the candidate devices", k, describeConstraint(spec)),
						})
						return expl
					}
				}
			}
			setAll(false)
			expl.Requests = append(expl.Requests, RequestExplanation{
				Reason: ReasonConstraint, Constraint: -1,
				Message: "the claim constraints cannot all be satisfied together by the candidate devices",
			})
			return expl
		}
		setAll(false)
	}
	for _, g := range s.groups {
		sl := g.slots[0]
		expl.Requests = append(expl.Requests, RequestExplanation{
			Claim: claimKey(s.claims[g.claim]), Request: sl.name, Reason: ReasonConflict, Needed: sl.need, Constraint: -1,
			Message: fmt.Sprintf("%d candidate devices, but not enough remain once the other requests are allocated", len(sl.cands)),
		})
	}
	return expl
}

func describeConstraint(c resourceapi.DeviceConstraint) string {
	if c.MatchAttribute != nil {
		return "matchAttribute " + string(*c.MatchAttribute)
	}
	return "distinctAttribute " + string(deref(c.DistinctAttribute))
}
