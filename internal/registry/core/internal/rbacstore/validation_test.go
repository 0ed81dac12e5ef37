package rbacstore

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateRules(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rule          rbacv1.PolicyRule
		clusterScoped bool
		wantField     string
	}{
		{name: "resource rule", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
		{name: "no verbs", rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}}, wantField: "rules[0].verbs"},
		{name: "no groups", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, Resources: []string{"pods"}}, wantField: "rules[0].apiGroups"},
		{name: "no resources", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}}, wantField: "rules[0].resources"},
		{name: "URL in a Role", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}, wantField: "rules[0].nonResourceURLs"},
		{name: "URL in a ClusterRole", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}, clusterScoped: true},
		{name: "URL and resources", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}, Resources: []string{"pods"}}, clusterScoped: true, wantField: "rules[0].nonResourceURLs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateRules([]rbacv1.PolicyRule{tc.rule}, tc.clusterScoped, field.NewPath("rules"))
			if tc.wantField == "" && len(errs) > 0 || tc.wantField != "" && (len(errs) == 0 || errs[0].Field != tc.wantField) {
				t.Errorf("errors %v, want one at %q", errs, tc.wantField)
			}
		})
	}
}

func TestValidateBinding(t *testing.T) {
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: "view"}
	}
	user := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}
	for _, tc := range []struct {
		name          string
		roleRef       rbacv1.RoleRef
		subjects      []rbacv1.Subject
		clusterScoped bool
		wantField     string
	}{
		{name: "role binding to a ClusterRole", roleRef: ref("ClusterRole"), subjects: []rbacv1.Subject{user}},
		{name: "role binding to a Role", roleRef: ref("Role"), subjects: []rbacv1.Subject{user}},
		{name: "cluster binding to a Role", roleRef: ref("Role"), clusterScoped: true, wantField: "roleRef.kind"},
		{name: "wrong group", roleRef: rbacv1.RoleRef{APIGroup: "example.com", Kind: "ClusterRole", Name: "view"}, wantField: "roleRef.apiGroup"},
		{name: "no role name", roleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole"}, wantField: "roleRef.name"},
		{name: "unknown subject kind", roleRef: ref("ClusterRole"), subjects: []rbacv1.Subject{{Kind: "Robot", Name: "r"}}, wantField: "subjects[0].kind"},
		{name: "service account without namespace, cluster-wide", roleRef: ref("ClusterRole"), clusterScoped: true,
			subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "robot"}}, wantField: "subjects[0].namespace"},
		{name: "user without a name", roleRef: ref("ClusterRole"), subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName}}, wantField: "subjects[0].name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateBinding(tc.roleRef, tc.subjects, tc.clusterScoped)
			if tc.wantField == "" && len(errs) > 0 || tc.wantField != "" && (len(errs) == 0 || errs[0].Field != tc.wantField) {
				t.Errorf("errors %v, want one at %q", errs, tc.wantField)
			}
		})
	}
}

func TestValidateAggregationRule(t *testing.T) {
	if errs := ValidateAggregationRule(&rbacv1.AggregationRule{}, field.NewPath("aggregationRule")); len(errs) == 0 {
		t.Error("an aggregation rule without selectors passed")
	}
	bad := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"bad key!": "x"}}}}
	if errs := ValidateAggregationRule(bad, field.NewPath("aggregationRule")); len(errs) == 0 {
		t.Error("an invalid label key passed")
	}
}
