package rbac

import (
	"context"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Escalation keeps users from granting what they do not hold, as
// upstream's RBAC storage does: a Role or ClusterRole may be written only
// by a user who holds every rule in it (in its namespace) or may
// "escalate" it, and a binding only by one who holds every rule of the
// role it refers to or may "bind" that role.
type Escalation struct {
	Resolver *Resolver
	// Authorizer is the server's whole authorizer, asked about the
	// escalate and bind verbs (the admin group may do both).
	Authorizer authorizer.Authorizer
}

// ConfirmRole returns a 403 unless the user in ctx may write a role with
// rules: resource is roles or clusterroles, namespace "" for a
// ClusterRole.
func (e *Escalation) ConfirmRole(ctx context.Context, resource schema.GroupResource, namespace, name string, rules []rbacv1.PolicyRule) error {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(resource, name, fmt.Errorf("no user on the request"))
	}
	if e.allowed(ctx, u, "escalate", resource, namespace, name) {
		return nil
	}
	return e.confirmHeld(ctx, u, resource, name, namespace, rules)
}

// ConfirmBinding returns a 403 unless the user in ctx may bind roleRef in
// namespace ("" for a ClusterRoleBinding).
func (e *Escalation) ConfirmBinding(ctx context.Context, resource schema.GroupResource, namespace, name string, roleRef rbacv1.RoleRef) error {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(resource, name, fmt.Errorf("no user on the request"))
	}
	roleResource := schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	roleNamespace := ""
	if roleRef.Kind == "Role" {
		roleResource.Resource, roleNamespace = "roles", namespace
	}
	if e.allowed(ctx, u, "bind", roleResource, roleNamespace, roleRef.Name) {
		return nil
	}
	rules, err := e.Resolver.RoleReferenceRules(roleRef, namespace)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return apierrors.NewForbidden(resource, name, fmt.Errorf("cannot bind %s %q: it does not exist and user %q may not bind it", roleRef.Kind, roleRef.Name, u.GetName()))
		}
		return apierrors.NewInternalError(err)
	}
	return e.confirmHeld(ctx, u, resource, name, namespace, rules)
}

func (e *Escalation) allowed(ctx context.Context, u user.Info, verb string, resource schema.GroupResource, namespace, name string) bool {
	if e.Authorizer == nil {
		return false
	}
	decision, _, err := e.Authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: resource.Group, APIVersion: "*", Resource: resource.Resource,
		Namespace: namespace, Name: name, ResourceRequest: true,
	})
	return err == nil && decision == authorizer.DecisionAllow
}

func (e *Escalation) confirmHeld(ctx context.Context, u user.Info, resource schema.GroupResource, name, namespace string, rules []rbacv1.PolicyRule) error {
	held, resolveErr := e.Resolver.RulesFor(ctx, u, namespace)
	covered, missing := validation.Covers(held, rules)
	if covered {
		return nil
	}
	descriptions := make([]string, 0, len(missing))
	for _, rule := range missing {
		descriptions = append(descriptions, CompactString(rule))
	}
	sort.Strings(descriptions)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(descriptions, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", resolveErr)
	}
	return apierrors.NewForbidden(resource, name, fmt.Errorf("%s", msg))
}

// ConfirmAggregation returns a 403 unless the user in ctx may escalate
// ClusterRoles: an aggregation rule gathers rules the writer need not
// hold, so upstream allows it only to cluster admins.
func (e *Escalation) ConfirmAggregation(ctx context.Context, name string) error {
	resource := schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(resource, name, fmt.Errorf("no user on the request"))
	}
	if e.allowed(ctx, u, "escalate", resource, "", name) {
		return nil
	}
	return apierrors.NewForbidden(resource, name, fmt.Errorf("user %q (groups=%q) must be allowed to escalate clusterroles to use aggregationRule", u.GetName(), u.GetGroups()))
}
