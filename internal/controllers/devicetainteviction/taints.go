package devicetainteviction

import (
	"fmt"
	"slices"
	"time"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// deviceID names one device the way allocation results and taint rule
// selectors do.
type deviceID struct {
	driver, pool, device string
}

func (id deviceID) String() string {
	return id.driver + "/" + id.pool + "/" + id.device
}

// appliedTaint is a taint that applies to one device, with where it comes
// from.
type appliedTaint struct {
	device deviceID
	taint  resourcev1.DeviceTaint
	// rule is the DeviceTaintRule that puts the taint on the device; nil
	// for a taint listed on the device in its ResourceSlice.
	rule *resourcev1.DeviceTaintRule
	// since is when the taint took effect: its timeAdded, or the creation
	// of the object carrying it when timeAdded is unset.
	since time.Time
}

func (t appliedTaint) String() string {
	source := "its ResourceSlice"
	if t.rule != nil {
		source = "DeviceTaintRule " + t.rule.Name
	}
	return fmt.Sprintf("device %s has taint %s from %s", t.device, taintString(t.taint), source)
}

func taintString(taint resourcev1.DeviceTaint) string {
	s := taint.Key
	if taint.Value != "" {
		s += "=" + taint.Value
	}
	return s + ":" + string(taint.Effect)
}

// ruleSelects reports whether the rule's selector matches the device:
// every field that is set must match; a nil selector matches nothing.
// An empty selector matches everything; validation only admits it with
// an explicit confirmation.
func ruleSelects(rule *resourcev1.DeviceTaintRule, id deviceID) bool {
	selector := rule.Spec.DeviceSelector
	if selector == nil {
		return false
	}
	return (selector.Driver == nil || *selector.Driver == id.driver) &&
		(selector.Pool == nil || *selector.Pool == id.pool) &&
		(selector.Device == nil || *selector.Device == id.device)
}

// ruleTaint returns the taint of the rule as applied to the device.
func ruleTaint(rule *resourcev1.DeviceTaintRule, id deviceID) appliedTaint {
	since := rule.CreationTimestamp.Time
	if rule.Spec.Taint.TimeAdded != nil {
		since = rule.Spec.Taint.TimeAdded.Time
	}
	return appliedTaint{device: id, taint: rule.Spec.Taint, rule: rule, since: since}
}

// sliceTaints returns the taints of the device as published in the slices
// of its pool. Only slices of the highest generation of the pool count:
// older ones are left-overs that the driver is about to replace.
func sliceTaints(poolSlices []*resourcev1.ResourceSlice, id deviceID) []appliedTaint {
	var generation int64
	for _, slice := range poolSlices {
		generation = max(generation, slice.Spec.Pool.Generation)
	}
	var taints []appliedTaint
	for _, slice := range poolSlices {
		if slice.Spec.Pool.Generation != generation || slice.Spec.Driver != id.driver || slice.Spec.Pool.Name != id.pool {
			continue
		}
		for i := range slice.Spec.Devices {
			device := &slice.Spec.Devices[i]
			if device.Name != id.device {
				continue
			}
			for _, taint := range device.Taints {
				since := slice.CreationTimestamp.Time
				if taint.TimeAdded != nil {
					since = taint.TimeAdded.Time
				}
				taints = append(taints, appliedTaint{device: id, taint: taint, since: since})
			}
		}
	}
	return taints
}

// tolerates matches a toleration against a taint as upstream does: the
// effect must be equal unless the toleration leaves it empty; operator
// Exists matches any value (and any key when the key is empty), Equal
// (the default) needs key and value to be equal.
func tolerates(toleration resourcev1.DeviceToleration, taint resourcev1.DeviceTaint) bool {
	if toleration.Effect != "" && toleration.Effect != taint.Effect {
		return false
	}
	switch toleration.Operator {
	case resourcev1.DeviceTolerationOpExists:
		return toleration.Key == "" || toleration.Key == taint.Key
	case "", resourcev1.DeviceTolerationOpEqual:
		return toleration.Key == taint.Key && toleration.Value == taint.Value
	default:
		return false
	}
}

// tolerated reports whether any toleration matches the taint, ignoring
// tolerationSeconds: what counts for taints that do not evict.
func tolerated(taint resourcev1.DeviceTaint, tolerations []resourcev1.DeviceToleration) bool {
	return slices.ContainsFunc(tolerations, func(toleration resourcev1.DeviceToleration) bool {
		return tolerates(toleration, taint)
	})
}

// evictionTimeFor says when the taint evicts the consumers of a device
// that was allocated with the tolerations, and false if it never does:
// only NoExecute taints evict; a matching toleration without seconds
// tolerates the taint forever, otherwise the smallest tolerationSeconds of
// the matching tolerations counts from when the taint was added, and
// without a matching toleration the eviction is due at once.
func evictionTimeFor(taint appliedTaint, tolerations []resourcev1.DeviceToleration) (time.Time, bool) {
	if taint.taint.Effect != resourcev1.DeviceTaintEffectNoExecute {
		return time.Time{}, false
	}
	var seconds *int64
	for _, toleration := range tolerations {
		if !tolerates(toleration, taint.taint) {
			continue
		}
		if toleration.TolerationSeconds == nil {
			return time.Time{}, false
		}
		if seconds == nil || *toleration.TolerationSeconds < *seconds {
			seconds = toleration.TolerationSeconds
		}
	}
	if seconds == nil || *seconds <= 0 {
		return taint.since, true
	}
	return taint.since.Add(time.Duration(*seconds) * time.Second), true
}

// evictionReason is one taint that evicts a pod, and when.
type evictionReason struct {
	appliedTaint
	// claim is the claim, in the pod's namespace, whose device has the
	// taint.
	claim string
	at    time.Time
}

// evictionDecision is when a pod has to go and why.
type evictionDecision struct {
	// at is the earliest time of all reasons.
	at time.Time
	// reasons are all taints that evict the pod, earliest first.
	reasons []evictionReason
}

// decideEviction looks at every device allocated to the claims and
// returns when the pod that uses them must be evicted, or nil when it may
// stay. taintsOf lists the taints that apply to a device.
func decideEviction(claims []*resourcev1.ResourceClaim, taintsOf func(deviceID) []appliedTaint) *evictionDecision {
	var reasons []evictionReason
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			id := deviceID{driver: result.Driver, pool: result.Pool, device: result.Device}
			for _, taint := range taintsOf(id) {
				at, evicts := evictionTimeFor(taint, result.Tolerations)
				if !evicts {
					continue
				}
				reasons = append(reasons, evictionReason{appliedTaint: taint, claim: claim.Name, at: at})
			}
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	slices.SortStableFunc(reasons, func(a, b evictionReason) int { return a.at.Compare(b.at) })
	return &evictionDecision{at: reasons[0].at, reasons: reasons}
}

// rules lists the rules among the reasons, each once.
func (d *evictionDecision) rules() []*resourcev1.DeviceTaintRule {
	if d == nil {
		return nil
	}
	var rules []*resourcev1.DeviceTaintRule
	for _, reason := range d.reasons {
		if reason.rule != nil && !slices.ContainsFunc(rules, func(rule *resourcev1.DeviceTaintRule) bool { return rule.UID == reason.rule.UID }) {
			rules = append(rules, reason.rule)
		}
	}
	return rules
}
