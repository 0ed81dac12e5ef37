package resourceclaim

import (
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/features"
)

// Fields behind feature gates that are off are dropped as upstream does: a
// create loses them; an update loses them unless the stored object (old)
// already uses them, so that turning a gate off does not make objects
// written while it was on impossible to update.

// DropDisabledSpecFields drops the gated fields of a claim spec; it is
// shared with ResourceClaimTemplates. old is nil on create.
func DropDisabledSpecFields(spec, old *resourceapi.ResourceClaimSpec) {
	if !features.Enabled(features.DRADerivedAttributes) && (old == nil || !usesDerivedAttributes(old)) {
		for i := range spec.Devices.Requests {
			request := &spec.Devices.Requests[i]
			if request.Exactly != nil {
				request.Exactly.DerivedAttributes = nil
			}
			for j := range request.FirstAvailable {
				request.FirstAvailable[j].DerivedAttributes = nil
			}
		}
	}
}

func usesDerivedAttributes(spec *resourceapi.ResourceClaimSpec) bool {
	for _, request := range spec.Devices.Requests {
		if request.Exactly != nil && len(request.Exactly.DerivedAttributes) > 0 {
			return true
		}
		for _, sub := range request.FirstAvailable {
			if len(sub.DerivedAttributes) > 0 {
				return true
			}
		}
	}
	return false
}

// dropDisabledStatusFields drops the gated fields of a claim status.
func dropDisabledStatusFields(claim, old *resourceapi.ResourceClaim) {
	if claim.Status.Allocation == nil || features.Enabled(features.DRAOptionalNodeOperations) || usesSkipNodeOperations(old) {
		return
	}
	for i := range claim.Status.Allocation.Devices.Results {
		claim.Status.Allocation.Devices.Results[i].SkipNodeOperations = nil
	}
}

func usesSkipNodeOperations(claim *resourceapi.ResourceClaim) bool {
	if claim == nil || claim.Status.Allocation == nil {
		return false
	}
	for _, result := range claim.Status.Allocation.Devices.Results {
		if len(result.SkipNodeOperations) > 0 {
			return true
		}
	}
	return false
}
