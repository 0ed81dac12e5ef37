// Package validation checks objects of resource.draplane.dev. The rules are
// those of upstream resource.k8s.io/v1 (Kubernetes 1.37) for the fields we
// have. Every error names the field path it is about.
package validation

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// ValidateDeviceClass validates a new DeviceClass.
func ValidateDeviceClass(class *resourceapi.DeviceClass) field.ErrorList {
	allErrs := validateObjectMeta(&class.ObjectMeta, false)
	return append(allErrs, validateDeviceClassSpec(&class.Spec, nil, field.NewPath("spec"))...)
}

// ValidateDeviceClassUpdate validates an update of a DeviceClass.
func ValidateDeviceClassUpdate(class, old *resourceapi.DeviceClass) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&class.ObjectMeta, &old.ObjectMeta, false)
	return append(allErrs, validateDeviceClassSpec(&class.Spec, &old.Spec, field.NewPath("spec"))...)
}

func validateDeviceClassSpec(spec, oldSpec *resourceapi.DeviceClassSpec, fldPath *field.Path) field.ErrorList {
	var stored storedExpressions
	configUnchanged := false
	if oldSpec != nil {
		stored = storedExpressions(selectorExpressions(oldSpec.Selectors))
		configUnchanged = apiequality.Semantic.DeepEqual(spec.Config, oldSpec.Config)
	}
	allErrs := validateSelectors(spec.Selectors, fldPath.Child("selectors"), stored)
	allErrs = append(allErrs, validateSlice(spec.Config, resourceapi.DeviceConfigMaxSize,
		func(config resourceapi.DeviceClassConfiguration, fldPath *field.Path) field.ErrorList {
			return validateDeviceConfiguration(config.DeviceConfiguration, fldPath, configUnchanged)
		}, fldPath.Child("config"))...)
	if name := spec.ExtendedResourceName; name != nil && !IsExtendedResourceName(corev1.ResourceName(*name)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("extendedResourceName"), *name, "must be a valid extended resource name"))
	}
	return allErrs
}

func selectorExpressions(selectors []resourceapi.DeviceSelector) sets.Set[string] {
	expressions := sets.New[string]()
	for _, selector := range selectors {
		if selector.CEL != nil {
			expressions.Insert(selector.CEL.Expression)
		}
	}
	return expressions
}

// ValidateResourceClaim validates a new ResourceClaim.
func ValidateResourceClaim(claim *resourceapi.ResourceClaim) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(claim, nil); len(errs) > 0 {
		return errs
	}
	allErrs := validateObjectMeta(&claim.ObjectMeta, true)
	return append(allErrs, validateResourceClaimSpec(&claim.Spec, field.NewPath("spec"))...)
}

// ValidateResourceClaimUpdate validates a spec update of a ResourceClaim.
// The spec is immutable, so it is only compared with the old one: the rest
// was checked on create, and an unchanged spec must stay acceptable even
// if the rules for new ones got stricter.
func ValidateResourceClaimUpdate(claim, old *resourceapi.ResourceClaim) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(claim, nil); len(errs) > 0 {
		return errs
	}
	allErrs := validateObjectMetaUpdate(&claim.ObjectMeta, &old.ObjectMeta, true)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(claim.Spec, old.Spec, field.NewPath("spec"))...)
}

// ValidateResourceClaimStatusUpdate validates a status update of a ResourceClaim.
func ValidateResourceClaimStatusUpdate(claim, old *resourceapi.ResourceClaim) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(claim, nil); len(errs) > 0 {
		return errs
	}
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&claim.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateResourceClaimStatusUpdate(claim, old)...)
}

// ValidateResourceClaimTemplate validates a new ResourceClaimTemplate.
func ValidateResourceClaimTemplate(template *resourceapi.ResourceClaimTemplate) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(template, nil); len(errs) > 0 {
		return errs
	}
	allErrs := validateObjectMeta(&template.ObjectMeta, true)
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, validateTemplateObjectMeta(&template.Spec.ObjectMeta, specPath.Child("metadata"))...)
	return append(allErrs, validateResourceClaimSpec(&template.Spec.Spec, specPath.Child("spec"))...)
}

// ValidateResourceClaimTemplateUpdate validates an update of a
// ResourceClaimTemplate, whose spec is immutable like a claim's.
func ValidateResourceClaimTemplateUpdate(template, old *resourceapi.ResourceClaimTemplate) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(template, nil); len(errs) > 0 {
		return errs
	}
	allErrs := validateObjectMetaUpdate(&template.ObjectMeta, &old.ObjectMeta, true)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(template.Spec, old.Spec, field.NewPath("spec"))...)
}

// ValidateResourceSlice validates a new ResourceSlice.
func ValidateResourceSlice(slice *resourceapi.ResourceSlice) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(slice, nil); len(errs) > 0 {
		return errs
	}
	allErrs := validateObjectMeta(&slice.ObjectMeta, false)
	return append(allErrs, validateResourceSliceSpec(&slice.Spec, nil, field.NewPath("spec"))...)
}

// ValidateResourceSliceUpdate validates an update of a ResourceSlice.
func ValidateResourceSliceUpdate(slice, old *resourceapi.ResourceSlice) field.ErrorList {
	if errs := ValidateQuantityMagnitudes(slice, nil); len(errs) > 0 {
		return errs
	}
	allErrs := validateObjectMetaUpdate(&slice.ObjectMeta, &old.ObjectMeta, false)
	return append(allErrs, validateResourceSliceSpec(&slice.Spec, &old.Spec, field.NewPath("spec"))...)
}

// ValidateDeviceTaintRule validates a new DeviceTaintRule.
func ValidateDeviceTaintRule(rule *resourceapi.DeviceTaintRule) field.ErrorList {
	allErrs := validateObjectMeta(&rule.ObjectMeta, false)
	allErrs = append(allErrs, validateDeviceTaintRuleSpec(&rule.Spec, nil, field.NewPath("spec"))...)
	allErrs = append(allErrs, validateSelectAllConfirmed(rule, nil)...)
	return append(allErrs, validateDeviceTaintRuleStatus(&rule.Status, field.NewPath("status"))...)
}

// ValidateDeviceTaintRuleUpdate validates a spec update of a DeviceTaintRule.
func ValidateDeviceTaintRuleUpdate(rule, old *resourceapi.DeviceTaintRule) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&rule.ObjectMeta, &old.ObjectMeta, false)
	allErrs = append(allErrs, validateSelectAllConfirmed(rule, old)...)
	return append(allErrs, validateDeviceTaintRuleSpec(&rule.Spec, &old.Spec, field.NewPath("spec"))...)
}

// ValidateDeviceTaintRuleStatusUpdate validates a status update of a DeviceTaintRule.
func ValidateDeviceTaintRuleStatusUpdate(rule, old *resourceapi.DeviceTaintRule) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&rule.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateDeviceTaintRuleStatus(&rule.Status, field.NewPath("status"))...)
}

func validateDeviceTaintRuleSpec(spec, oldSpec *resourceapi.DeviceTaintRuleSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if selector := spec.DeviceSelector; selector != nil {
		selectorPath := fldPath.Child("deviceSelector")
		if selector.Driver != nil {
			allErrs = append(allErrs, validateDriverName(*selector.Driver, selectorPath.Child("driver"))...)
		}
		if selector.Pool != nil {
			allErrs = append(allErrs, validatePoolName(*selector.Pool, selectorPath.Child("pool"))...)
		}
		if selector.Device != nil {
			allErrs = append(allErrs, validateDeviceName(*selector.Device, selectorPath.Child("device"))...)
		}
	}
	var oldTaint *resourceapi.DeviceTaint
	if oldSpec != nil {
		oldTaint = &oldSpec.Taint
	}
	return append(allErrs, validateDeviceTaint(spec.Taint, oldTaint, fldPath.Child("taint"))...)
}

func validateDeviceTaintRuleStatus(status *resourceapi.DeviceTaintRuleStatus, fldPath *field.Path) field.ErrorList {
	return validateConditions(status.Conditions, resourceapi.DeviceTaintRuleStatusMaxConditions, fldPath.Child("conditions"))
}
