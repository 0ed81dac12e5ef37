// Package rbacstore holds what the four rbac.authorization.k8s.io/v1
// resources of core-lite share: their validation, as upstream's
// pkg/apis/rbac/validation, and a store that refuses writes granting
// rules the writer does not hold.
package rbacstore

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateName checks role and binding names, which are path segments
// (they may hold colons, as system:discovery).
func ValidateName(name string, prefix bool) []string { return content.IsPathSegmentName(name) }

// ValidateRules checks the rules of a Role (nonResourceURLs refused) or a
// ClusterRole.
func ValidateRules(rules []rbacv1.PolicyRule, clusterScoped bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, rule := range rules {
		p := fldPath.Index(i)
		if len(rule.Verbs) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if !clusterScoped {
				allErrs = append(allErrs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return allErrs
}

// ValidateAggregationRule checks the label selectors of a ClusterRole's
// aggregation rule.
func ValidateAggregationRule(rule *rbacv1.AggregationRule, fldPath *field.Path) field.ErrorList {
	if rule == nil {
		return nil
	}
	var allErrs field.ErrorList
	if len(rule.ClusterRoleSelectors) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("clusterRoleSelectors"), "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	for i := range rule.ClusterRoleSelectors {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(&rule.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("clusterRoleSelectors").Index(i))...)
	}
	return allErrs
}

// ValidateBinding checks a binding's role reference and subjects; a
// RoleBinding may refer to a Role or a ClusterRole, a ClusterRoleBinding
// only to a ClusterRole.
func ValidateBinding(roleRef rbacv1.RoleRef, subjects []rbacv1.Subject, clusterScoped bool) field.ErrorList {
	var allErrs field.ErrorList
	refPath := field.NewPath("roleRef")
	if roleRef.APIGroup != rbacv1.GroupName {
		allErrs = append(allErrs, field.NotSupported(refPath.Child("apiGroup"), roleRef.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"Role", "ClusterRole"}
	if clusterScoped {
		kinds = []string{"ClusterRole"}
	}
	switch {
	case roleRef.Kind == "ClusterRole", roleRef.Kind == "Role" && !clusterScoped:
	default:
		allErrs = append(allErrs, field.NotSupported(refPath.Child("kind"), roleRef.Kind, kinds))
	}
	if roleRef.Name == "" {
		allErrs = append(allErrs, field.Required(refPath.Child("name"), ""))
	} else {
		for _, msg := range ValidateName(roleRef.Name, false) {
			allErrs = append(allErrs, field.Invalid(refPath.Child("name"), roleRef.Name, msg))
		}
	}
	for i, subject := range subjects {
		allErrs = append(allErrs, validateSubject(subject, clusterScoped, field.NewPath("subjects").Index(i))...)
	}
	return allErrs
}

func validateSubject(s rbacv1.Subject, clusterScoped bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if s.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apimachineryvalidation.ValidateServiceAccountName(s.Name, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if clusterScoped && s.Namespace == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return allErrs
}
