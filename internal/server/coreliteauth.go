package server

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/auth/rbac"
	"github.com/draplane/draplane/internal/controllermanager"
	"github.com/draplane/draplane/internal/controllers/clusterroleaggregation"
	"github.com/draplane/draplane/internal/registry/core"
	"github.com/draplane/draplane/internal/server/pki"
)

// coreLiteAuth is standalone authorization: RBAC over core-lite's own
// rbac.authorization.k8s.io objects, read from informer caches.
type coreLiteAuth struct {
	resolver   *rbac.Resolver
	authorizer *rbac.Authorizer
	// node restricts node-bound identities to their node's objects.
	node   *node.Authorizer
	synced []cache.InformerSynced
	// rolesReady is closed once the default roles are reconciled and the
	// caches the authorizer reads have synced (rbac/bootstrap-roles).
	rolesReady chan struct{}
}

func newCoreLiteAuth(c *CoreLite) *coreLiteAuth {
	rbacInformers := c.informers.Rbac().V1()
	resolver := &rbac.Resolver{
		Roles:               rbacInformers.Roles().Lister(),
		RoleBindings:        rbacInformers.RoleBindings().Lister(),
		ClusterRoles:        rbacInformers.ClusterRoles().Lister(),
		ClusterRoleBindings: rbacInformers.ClusterRoleBindings().Lister(),
	}
	claims := c.resourceInformers.Resource().V1().ResourceClaims()
	pods := c.informers.Core().V1().Pods()
	return &coreLiteAuth{
		resolver:   resolver,
		authorizer: &rbac.Authorizer{Resolver: resolver},
		node:       &node.Authorizer{Claims: claims.Lister(), Pods: pods.Lister()},
		rolesReady: make(chan struct{}),
		synced: []cache.InformerSynced{
			claims.Informer().HasSynced,
			pods.Informer().HasSynced,
			rbacInformers.Roles().Informer().HasSynced,
			rbacInformers.RoleBindings().Informer().HasSynced,
			rbacInformers.ClusterRoles().Informer().HasSynced,
			rbacInformers.ClusterRoleBindings().Informer().HasSynced,
		},
	}
}

// RBACAuthorizer is the authorizer of core-lite's RBAC objects; the
// command puts it after the admin group's in the server's chain.
func (c *CoreLite) RBACAuthorizer() authorizer.Authorizer { return c.auth.authorizer }

// RolesReady is closed once the server authorizes by its default roles
// and bindings: identities other than admin (the simulated nodes) may
// act from then on.
func (c *CoreLite) RolesReady() <-chan struct{} { return c.auth.rolesReady }

// NodeAuthorizer denies node-bound identities other nodes' objects; the
// command puts it before RBAC.
func (c *CoreLite) NodeAuthorizer() authorizer.Authorizer { return c.auth.node }

// adminRules answers SelfSubjectRulesReviews of the admin group, which
// is allowed everything without a binding.
type adminRules struct{}

func (adminRules) RulesFor(_ context.Context, u user.Info, _ string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	for _, group := range u.GetGroups() {
		if group == pki.AdminGroup {
			return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
				[]authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, false, nil
		}
	}
	return nil, nil, false, nil
}

// installAuth serves rbac.authorization.k8s.io/v1 and the self reviews
// (authorization.k8s.io/v1, authentication.k8s.io/v1), keeps the default
// roles and bindings and gives manager the ClusterRole aggregation
// controller, which runs on every replica. authz is the server's whole
// authorizer.
func (c *CoreLite) installAuth(s *genericapiserver.GenericAPIServer, handlers handlerInstaller, scheme *runtime.Scheme, codecs serializer.CodecFactory, optsGetter generic.RESTOptionsGetter, authz authorizer.Authorizer, manager *controllermanager.ControllerManager) error {
	install := func(group string, storage map[string]rest.Storage) error {
		info := newAPIGroupInfo(group, scheme, codecs)
		info.VersionedResourcesStorageMap["v1"] = storage
		if err := handlers.install(s, genericapiserver.APIGroupPrefix, &info); err != nil {
			return fmt.Errorf("install %s/v1: %w", group, err)
		}
		return nil
	}
	escalation := &rbac.Escalation{Resolver: c.auth.resolver, Authorizer: authz}
	rbacStorage, err := core.NewRBACStorage(optsGetter, escalation)
	if err != nil {
		return fmt.Errorf("rbac.authorization.k8s.io/v1 storage: %w", err)
	}
	if err := install("rbac.authorization.k8s.io", rbacStorage); err != nil {
		return err
	}
	rules := union.NewRuleResolvers(adminRules{}, c.auth.authorizer)
	if err := install("authorization.k8s.io", core.NewAuthorizationStorage(authz, rules)); err != nil {
		return err
	}
	if err := install("authentication.k8s.io", core.NewAuthenticationStorage()); err != nil {
		return err
	}

	aggregation, err := clusterroleaggregation.NewController(klog.Background(), c.client.RbacV1(), c.informers.Rbac().V1().ClusterRoles())
	if err != nil {
		return err
	}
	// /readyz waits for the default roles and for the caches the
	// authorizer reads, so a ready server authorizes by its bindings.
	if err := s.AddPostStartHook("rbac/bootstrap-roles", func(hook genericapiserver.PostStartHookContext) error {
		logger := klog.Background().WithName("rbac-bootstrap")
		err := wait.PollUntilContextTimeout(hook, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := rbac.ReconcileDefaults(ctx, c.client); err != nil {
				logger.V(2).Info("Default roles not reconciled yet, retrying", "err", err)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("reconcile default roles: %w", err)
		}
		if !cache.WaitForCacheSync(hook.Done(), c.auth.synced...) {
			return fmt.Errorf("RBAC caches not synced")
		}
		close(c.auth.rolesReady)
		return nil
	}); err != nil {
		return err
	}
	manager.AddEveryReplica(clusterroleaggregation.ControllerName, 1, aggregation.Run)
	return nil
}
