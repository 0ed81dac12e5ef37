package validation

import (
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Node selectors are core types; Kubernetes validates them only on its
// internal types (k8s.io/kubernetes pkg/apis/core/validation), so this is
// our one copy of that validation, for the node selectors of slices,
// devices and allocations and for pods' node affinity. It behaves as
// upstream's ValidateNodeSelector, ValidateNodeSelectorTerm,
// ValidateNodeSelectorRequirement and ValidateNodeFieldSelectorRequirement:
// the same checks, error types, messages and order.

// ValidateNodeSelector requires at least one term and validates each.
// allowInvalidLabelValue passes over label values that are not valid, as
// upstream does where such a value can do no harm.
func ValidateNodeSelector(selector *corev1.NodeSelector, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(selector.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var allErrs field.ErrorList
	for i, term := range selector.NodeSelectorTerms {
		allErrs = append(allErrs, ValidateNodeSelectorTerm(term, allowInvalidLabelValue, termsPath.Index(i))...)
	}
	return allErrs
}

// ValidateNodeSelectorTerm validates the label and field requirements of
// one term. An empty term is valid (it matches no node).
func ValidateNodeSelectorTerm(term corev1.NodeSelectorTerm, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for j, req := range term.MatchExpressions {
		allErrs = append(allErrs, validateNodeSelectorRequirement(req, allowInvalidLabelValue, fldPath.Child("matchExpressions").Index(j))...)
	}
	for j, req := range term.MatchFields {
		allErrs = append(allErrs, validateNodeFieldSelectorRequirement(req, fldPath.Child("matchFields").Index(j))...)
	}
	return allErrs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	valuesPath := fldPath.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			allErrs = append(allErrs, field.Required(valuesPath, "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			allErrs = append(allErrs, field.Forbidden(valuesPath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			allErrs = append(allErrs, field.Required(valuesPath, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	allErrs = append(allErrs, metav1validation.ValidateLabelName(req.Key, fldPath.Child("key"))...)
	if !allowInvalidLabelValue {
		for i, value := range req.Values {
			allErrs = append(allErrs, validateLabelValue(value, valuesPath.Index(i))...)
		}
	}
	return allErrs
}

// validateNodeFieldSelectorRequirement: node field selectors support only
// metadata.name with In or NotIn and exactly one value, a node name.
func validateNodeFieldSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) != 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	if req.Key != "metadata.name" {
		return append(allErrs, field.Invalid(fldPath.Child("key"), req.Key, "not a valid field selector key"))
	}
	for i, value := range req.Values {
		allErrs = append(allErrs, invalidMessages(fldPath.Child("values").Index(i), value, apimachineryvalidation.NameIsDNSSubdomain(value, false))...)
	}
	return allErrs
}
