package rbac

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// Resolver finds the rules a user holds, from listers of the four RBAC
// kinds (informer caches in the server).
type Resolver struct {
	Roles               rbaclisters.RoleLister
	RoleBindings        rbaclisters.RoleBindingLister
	ClusterRoles        rbaclisters.ClusterRoleLister
	ClusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

// Visitor is called with each rule a user holds and the binding it comes
// from, or with an error resolving one; it returns false to stop.
type Visitor func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool

// RulesFor returns every rule the user holds in namespace (cluster-wide
// ones only for ""), and the errors met resolving role references.
func (r *Resolver) RulesFor(ctx context.Context, u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	r.VisitRulesFor(ctx, u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// VisitRulesFor calls visit with the rules of every ClusterRoleBinding
// and, in a namespace, every RoleBinding there that names the user or one
// of its groups.
func (r *Resolver) VisitRulesFor(ctx context.Context, u user.Info, namespace string, visit Visitor) {
	clusterRoleBindings, err := r.ClusterRoleBindings.List(labels.Everything())
	if err != nil && !visit(nil, nil, err) {
		return
	}
	for _, binding := range clusterRoleBindings {
		i, ok := appliesTo(u, binding.Subjects, "")
		if !ok {
			continue
		}
		rules, err := r.RoleReferenceRules(binding.RoleRef, "")
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		source := bindingSource{kind: "ClusterRoleBinding", name: binding.Name, roleRef: binding.RoleRef, subject: binding.Subjects[i]}
		for j := range rules {
			if !visit(source, &rules[j], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	roleBindings, err := r.RoleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil && !visit(nil, nil, err) {
		return
	}
	for _, binding := range roleBindings {
		i, ok := appliesTo(u, binding.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := r.RoleReferenceRules(binding.RoleRef, namespace)
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		source := bindingSource{kind: "RoleBinding", name: binding.Namespace + "/" + binding.Name, roleRef: binding.RoleRef, subject: binding.Subjects[i], namespace: namespace}
		for j := range rules {
			if !visit(source, &rules[j], nil) {
				return
			}
		}
	}
}

// RoleReferenceRules returns the rules of the Role (in namespace) or
// ClusterRole a binding refers to.
func (r *Resolver) RoleReferenceRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		role, err := r.Roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	case "ClusterRole":
		role, err := r.ClusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	default:
		return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
	}
}

func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		if subjectMatches(u, s, namespace) {
			return i, true
		}
	}
	return 0, false
}

func subjectMatches(u user.Info, s rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.GetName() == s.Name
	case rbacv1.GroupKind:
		return slices.Contains(u.GetGroups(), s.Name)
	case rbacv1.ServiceAccountKind:
		ns := namespace
		if s.Namespace != "" {
			ns = s.Namespace
		}
		return ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName())
	default:
		return false
	}
}

// bindingSource names the binding a rule was found through, as upstream
// does in its allow reasons.
type bindingSource struct {
	kind, name, namespace string
	roleRef               rbacv1.RoleRef
	subject               rbacv1.Subject
}

func (b bindingSource) String() string {
	subject := fmt.Sprintf("%s %q", b.subject.Kind, b.subject.Name)
	if b.subject.Kind == rbacv1.ServiceAccountKind {
		ns := b.subject.Namespace
		if ns == "" {
			ns = b.namespace
		}
		subject = fmt.Sprintf("%s %q", b.subject.Kind, b.subject.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q of %s %q to %s", b.kind, b.name, b.roleRef.Kind, b.roleRef.Name, subject)
}
