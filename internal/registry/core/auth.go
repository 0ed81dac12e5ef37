package core

import (
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/auth/rbac"
	"github.com/draplane/draplane/internal/registry/core/clusterrole"
	"github.com/draplane/draplane/internal/registry/core/clusterrolebinding"
	"github.com/draplane/draplane/internal/registry/core/role"
	"github.com/draplane/draplane/internal/registry/core/rolebinding"
	"github.com/draplane/draplane/internal/registry/core/selfsubjectaccessreview"
	"github.com/draplane/draplane/internal/registry/core/selfsubjectreview"
	"github.com/draplane/draplane/internal/registry/core/selfsubjectrulesreview"
)

// NewRBACStorage returns the storage of rbac.authorization.k8s.io/v1:
// "roles", "clusterroles", "rolebindings", "clusterrolebindings". With
// escalation, roles and bindings may grant only what their writer holds.
func NewRBACStorage(optsGetter generic.RESTOptionsGetter, escalation *rbac.Escalation) (map[string]rest.Storage, error) {
	roles, err := role.NewREST(optsGetter, escalation)
	if err != nil {
		return nil, err
	}
	clusterRoles, err := clusterrole.NewREST(optsGetter, escalation)
	if err != nil {
		return nil, err
	}
	roleBindings, err := rolebinding.NewREST(optsGetter, escalation)
	if err != nil {
		return nil, err
	}
	clusterRoleBindings, err := clusterrolebinding.NewREST(optsGetter, escalation)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"roles":               roles,
		"clusterroles":        clusterRoles,
		"rolebindings":        roleBindings,
		"clusterrolebindings": clusterRoleBindings,
	}, nil
}

// NewAuthorizationStorage returns the storage of authorization.k8s.io/v1:
// "selfsubjectaccessreviews" and "selfsubjectrulesreviews", answered by
// the server's authorizer and rule resolver.
func NewAuthorizationStorage(authz authorizer.Authorizer, rules authorizer.RuleResolver) map[string]rest.Storage {
	return map[string]rest.Storage{
		"selfsubjectaccessreviews": selfsubjectaccessreview.NewREST(authz),
		"selfsubjectrulesreviews":  selfsubjectrulesreview.NewREST(rules),
	}
}

// NewAuthenticationStorage returns the storage of
// authentication.k8s.io/v1: "selfsubjectreviews".
func NewAuthenticationStorage() map[string]rest.Storage {
	return map[string]rest.Storage{"selfsubjectreviews": selfsubjectreview.NewREST()}
}
