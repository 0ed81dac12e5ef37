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
// allocated on the node. Message renders it.
type RequestExplanation struct {
	// Claim is namespace/name of the claim.
	Claim string
	// Request is "req" or "req/sub"; empty for problems of the whole claim.
	Request string
	Class   string
	Reason  Reason
	// Needed is the number of devices asked for; 0 with AllDevices.
	Needed     int
	AllDevices bool
	Counts     DeviceCounts
	// Selector is the first selector that rejected devices, and how many.
	Selector         string
	SelectorRejected int
	// SelectorError is the first evaluation error, SelectorErrors how many
	// devices failed evaluation (and thus did not match).
	SelectorError  string
	SelectorErrors int
	// Taint is the first taint that was not tolerated.
	Taint *resourceapi.DeviceTaint
	// Constraint is the index of the unsatisfiable claim constraint, -1 if
	// none; the attribute, its kind and the requests it covers follow.
	Constraint          int
	ConstraintAttribute string
	ConstraintMatch     bool
	ConstraintRequests  []string
	// Pool describes the unusable pool that hides devices.
	Pool string
	// Counter names the first used-up shared counter, as
	// driver/pool/counterSet/counter.
	Counter string
	// Detail is the message of problems that need no counting (unknown
	// class, invalid selector, ...).
	Detail string
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
	for i := range e.Requests {
		r := &e.Requests[i]
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case r.Request != "" && r.Reason != ReasonConstraint:
			fmt.Fprintf(&b, "claim %s request %s: %s", r.Claim, r.Request, r.Message())
		case r.Claim != "":
			fmt.Fprintf(&b, "claim %s: %s", r.Claim, r.Message())
		default:
			b.WriteString(r.Message())
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

// Message describes the problem in a sentence.
func (r *RequestExplanation) Message() string {
	if r.Detail != "" {
		return r.Detail
	}
	c := r.Counts
	need := "one device"
	switch {
	case r.AllDevices:
		need = "all matching devices"
	case r.Needed > 1:
		need = fmt.Sprintf("%d devices", r.Needed)
	}
	switch r.Reason {
	case ReasonNoDevices:
		return fmt.Sprintf("needs %s of class %s, but the node has only %d usable devices", need, r.Class, c.OnNode)
	case ReasonPoolUnusable:
		if r.AllDevices {
			return fmt.Sprintf("asks for all devices, but %s", r.Pool)
		}
		return fmt.Sprintf("needs %s of class %s, but the node has only %d usable devices; %s", need, r.Class, c.OnNode, r.Pool)
	case ReasonClassMismatch:
		return fmt.Sprintf("needs %s of class %s, but only %d of %d devices on the node match the class (selector %q rejected %d)", need, r.Class, c.MatchedClass, c.OnNode, r.Selector, r.SelectorRejected)
	case ReasonSelectorMismatch:
		return fmt.Sprintf("needs %s, %d devices match class %s but selector %q rejected %d of them", need, c.MatchedClass, r.Class, r.Selector, r.SelectorRejected)
	case ReasonSelectorError:
		return fmt.Sprintf("needs %s, only %d of %d devices match class %s and the selectors; evaluation failed on %d devices: %s", need, c.MatchedSelectors, c.OnNode, r.Class, r.SelectorErrors, r.SelectorError)
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
		counter := ""
		if r.Counter != "" {
			counter = " (" + r.Counter + ")"
		}
		return fmt.Sprintf("needs %s, %d matching devices are free but the shared counters%s of %d of them are used up by other partitions", need, c.Free, counter, c.Free-c.Available)
	case ReasonConstraint:
		if r.Constraint < 0 {
			return "the claim constraints cannot all be satisfied together by the candidate devices"
		}
		kind := "distinctAttribute"
		if r.ConstraintMatch {
			kind = "matchAttribute"
		}
		scope := ""
		if len(r.ConstraintRequests) > 0 {
			scope = " over requests " + strings.Join(r.ConstraintRequests, ",")
		}
		return fmt.Sprintf("constraint #%d (%s %s%s) cannot be satisfied by the candidate devices", r.Constraint, kind, r.ConstraintAttribute, scope)
	case ReasonConflict:
		return fmt.Sprintf("%d candidate devices, but not enough remain once the other requests are allocated", c.Available)
	}
	return string(r.Reason)
}
