package resourceclaim

import (
	"k8s.io/component-base/featuregate"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// Fields behind feature gates that are off are dropped as upstream does: a
// create loses them; an update loses them unless the stored object (old)
// already uses them, so that turning a gate off does not make objects
// written while it was on impossible to update. Gates locked on
// (DRAAdminAccess, DRAPrioritizedList, DRAResourceClaimDeviceStatus) never
// drop anything and are left out.

// specField is a gated field of a claim spec.
type specField struct {
	gate  featuregate.Feature
	inUse func(*resourceapi.ResourceClaimSpec) bool
	drop  func(*resourceapi.ResourceClaimSpec)
}

// specFields are the gated fields of a claim spec, in upstream's order.
var specFields = []specField{
	{features.DRADeviceTaints,
		func(spec *resourceapi.ResourceClaimSpec) bool {
			return anyRequest(spec, func(r requestFields) bool { return len(*r.tolerations) > 0 })
		},
		func(spec *resourceapi.ResourceClaimSpec) {
			eachRequest(spec, func(r requestFields) { *r.tolerations = nil })
		}},
	// DRAConsumableCapacity brought distinctAttribute along with capacity
	// requests; upstream gates both.
	{features.DRAConsumableCapacity, usesConsumableCapacity,
		func(spec *resourceapi.ResourceClaimSpec) {
			for i := range spec.Devices.Constraints {
				spec.Devices.Constraints[i].DistinctAttribute = nil
			}
			eachRequest(spec, func(r requestFields) { *r.capacity = nil })
		}},
	{features.DRADerivedAttributes,
		func(spec *resourceapi.ResourceClaimSpec) bool {
			return anyRequest(spec, func(r requestFields) bool { return len(*r.derived) > 0 })
		},
		func(spec *resourceapi.ResourceClaimSpec) {
			eachRequest(spec, func(r requestFields) { *r.derived = nil })
		}},
}

func usesConsumableCapacity(spec *resourceapi.ResourceClaimSpec) bool {
	for _, c := range spec.Devices.Constraints {
		if c.DistinctAttribute != nil {
			return true
		}
	}
	return anyRequest(spec, func(r requestFields) bool { return *r.capacity != nil })
}

// requestFields points at the gated fields of an exact request or a
// subrequest.
type requestFields struct {
	tolerations *[]resourceapi.DeviceToleration
	capacity    **resourceapi.CapacityRequirements
	derived     *[]resourceapi.DeviceDerivedAttribute
}

func eachRequest(spec *resourceapi.ResourceClaimSpec, f func(requestFields)) {
	anyRequest(spec, func(r requestFields) bool { f(r); return false })
}

// anyRequest reports whether pred holds for an exact request or subrequest.
func anyRequest(spec *resourceapi.ResourceClaimSpec, pred func(requestFields) bool) bool {
	for i := range spec.Devices.Requests {
		request := &spec.Devices.Requests[i]
		if e := request.Exactly; e != nil && pred(requestFields{&e.Tolerations, &e.Capacity, &e.DerivedAttributes}) {
			return true
		}
		for j := range request.FirstAvailable {
			sub := &request.FirstAvailable[j]
			if pred(requestFields{&sub.Tolerations, &sub.Capacity, &sub.DerivedAttributes}) {
				return true
			}
		}
	}
	return false
}

// DropDisabledSpecFields drops the gated fields of a claim spec; it is
// shared with ResourceClaimTemplates. old is nil on create.
func DropDisabledSpecFields(spec, old *resourceapi.ResourceClaimSpec) {
	for _, f := range specFields {
		if features.Enabled(f.gate) || (old != nil && f.inUse(old)) {
			continue
		}
		f.drop(spec)
	}
}

// statusField is a gated field of a claim status; inUse looks at the
// whole claim (upstream counts a spec field of the same gate as use).
type statusField struct {
	gate  featuregate.Feature
	inUse func(*resourceapi.ResourceClaim) bool
	drop  func(*resourceapi.ResourceClaim)
}

var statusFields = []statusField{
	{features.DRAConsumableCapacity,
		func(claim *resourceapi.ResourceClaim) bool {
			if usesConsumableCapacity(&claim.Spec) {
				return true
			}
			for _, d := range claim.Status.Devices {
				if d.ShareID != nil {
					return true
				}
			}
			return anyResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) bool {
				return r.ShareID != nil || r.ConsumedCapacity != nil
			})
		},
		func(claim *resourceapi.ResourceClaim) {
			eachResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) { r.ShareID, r.ConsumedCapacity = nil, nil })
			for i := range claim.Status.Devices {
				claim.Status.Devices[i].ShareID = nil
			}
		}},
	{features.DRADeviceBindingConditions,
		func(claim *resourceapi.ResourceClaim) bool {
			return anyResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) bool {
				return r.BindingConditions != nil || r.BindingFailureConditions != nil
			})
		},
		func(claim *resourceapi.ResourceClaim) {
			eachResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) {
				r.BindingConditions, r.BindingFailureConditions = nil, nil
			})
		}},
	{features.DRAOptionalNodeOperations,
		func(claim *resourceapi.ResourceClaim) bool {
			return anyResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) bool { return len(r.SkipNodeOperations) > 0 })
		},
		func(claim *resourceapi.ResourceClaim) {
			eachResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) { r.SkipNodeOperations = nil })
		}},
}

func anyResult(claim *resourceapi.ResourceClaim, pred func(*resourceapi.DeviceRequestAllocationResult) bool) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	for i := range claim.Status.Allocation.Devices.Results {
		if pred(&claim.Status.Allocation.Devices.Results[i]) {
			return true
		}
	}
	return false
}

func eachResult(claim *resourceapi.ResourceClaim, f func(*resourceapi.DeviceRequestAllocationResult)) {
	anyResult(claim, func(r *resourceapi.DeviceRequestAllocationResult) bool { f(r); return false })
}

// dropDisabledStatusFields drops the gated fields of a claim status.
func dropDisabledStatusFields(claim, old *resourceapi.ResourceClaim) {
	for _, f := range statusFields {
		if features.Enabled(f.gate) || f.inUse(old) {
			continue
		}
		f.drop(claim)
	}
}
