package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether rule allows the request described by attrs.
func RuleAllows(attrs authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if attrs.IsResourceRequest() {
		resource := attrs.GetResource()
		if attrs.GetSubresource() != "" {
			resource += "/" + attrs.GetSubresource()
		}
		return verbMatches(rule, attrs.GetVerb()) &&
			apiGroupMatches(rule, attrs.GetAPIGroup()) &&
			resourceMatches(rule, resource, attrs.GetSubresource()) &&
			resourceNameMatches(rule, attrs.GetName())
	}
	return verbMatches(rule, attrs.GetVerb()) && nonResourceURLMatches(rule, attrs.GetPath())
}

// RulesAllow reports whether any of rules allows the request.
func RulesAllow(attrs authorizer.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(attrs, &rules[i]) {
			return true
		}
	}
	return false
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

// resourceMatches matches "resource", "resource/subresource", "*" (any
// resource and subresource) and "*/subresource".
func resourceMatches(rule *rbacv1.PolicyRule, combined, subresource string) bool {
	for _, r := range rule.Resources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource):
			return true
		}
	}
	return false
}

// resourceNameMatches: a rule without resource names matches every name;
// one with names never matches a request without one (list, create).
func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

// nonResourceURLMatches matches a path exactly or by a prefix ending in
// "*".
func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")) {
			return true
		}
	}
	return false
}

// CompactString renders a rule the way upstream's escalation messages do:
// {APIGroups:["x"], Resources:["y"], Verbs:["get"]}.
func CompactString(rule rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, values []string) {
		if len(values) > 0 {
			parts = append(parts, name+":"+quoteAll(values))
		}
	}
	add("APIGroups", rule.APIGroups)
	add("Resources", rule.Resources)
	add("ResourceNames", rule.ResourceNames)
	add("NonResourceURLs", rule.NonResourceURLs)
	add("Verbs", rule.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

func quoteAll(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = `"` + v + `"`
	}
	return "[" + strings.Join(quoted, " ") + "]"
}
