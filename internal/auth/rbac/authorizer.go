package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer allows a request when a rule the user holds allows it, and
// has no opinion otherwise (the next authorizer, or a 403).
type Authorizer struct {
	Resolver *Resolver
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// Authorize implements authorizer.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	var allowedBy fmt.Stringer
	var errs []error
	a.Resolver.VisitRulesFor(ctx, attrs.GetUser(), attrs.GetNamespace(), func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(attrs, rule) {
			allowedBy = source
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowedBy != nil {
		return authorizer.DecisionAllow, "RBAC: allowed by " + allowedBy.String(), nil
	}
	reason := ""
	if len(errs) > 0 {
		reason = fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return authorizer.DecisionNoOpinion, reason, nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer; RBAC has no
// conditions.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor implements authorizer.RuleResolver (SelfSubjectRulesReview).
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	var resourceRules []authorizer.ResourceRuleInfo
	var nonResourceRules []authorizer.NonResourceRuleInfo
	rules, err := a.Resolver.RulesFor(ctx, u, namespace)
	for _, rule := range rules {
		if len(rule.Resources) > 0 {
			resourceRules = append(resourceRules, &authorizer.DefaultResourceRuleInfo{
				Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames,
			})
		}
		if len(rule.NonResourceURLs) > 0 {
			nonResourceRules = append(nonResourceRules, &authorizer.DefaultNonResourceRuleInfo{
				Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs,
			})
		}
	}
	return resourceRules, nonResourceRules, false, err
}
