// Package rbac evaluates rbac.authorization.k8s.io/v1 policy: which rules
// a user holds in a namespace through ClusterRoleBindings and RoleBindings,
// whether one of them allows a request, and whether a user may grant the
// rules of a role (escalation prevention).
//
// Upstream's evaluator lives in k8s.io/kubernetes (plugin/pkg/auth/authorizer/rbac
// and pkg/registry/rbac/validation), which cannot be imported outside that
// module without replacing every staging module, and no other maintained
// module exports it. This package follows its rules and messages; the rule
// comparison for escalation checks is k8s.io/component-helpers'
// (auth/rbac/validation.Covers).
package rbac
