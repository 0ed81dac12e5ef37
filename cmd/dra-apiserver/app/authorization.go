package app

import (
	"errors"

	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/path"
	"k8s.io/apiserver/pkg/authorization/union"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"

	"github.com/draplane/draplane/internal/server"
)

// applyAuthorization sets the authorizer. Standalone, without
// --authorization-kubeconfig and outside a cluster, nobody can answer
// SubjectAccessReviews: the admin group and the health paths are allowed,
// then core-lite's RBAC decides (when core-lite is served), and everybody
// else is denied. The delegating options would warn that
// SubjectAccessReviews won't work, which here is the design, not something
// a user could act on. With a kubeconfig (aggregated mode, or
// --authorization-kubeconfig), or in a cluster, the delegating options
// apply as they are.
func (o *Options) applyAuthorization(info *genericapiserver.AuthorizationInfo, coreLite *server.CoreLite) error {
	a := o.Authorization
	if a == nil || a.RemoteKubeConfigFile != "" || !a.RemoteKubeConfigFileOptional {
		return a.ApplyTo(info)
	}
	if _, err := rest.InClusterConfig(); !errors.Is(err, rest.ErrNotInCluster) {
		return a.ApplyTo(info)
	}
	var authorizers []union.NamedAuthorizer
	if len(a.AlwaysAllowGroups) > 0 {
		authorizers = append(authorizers, union.NamedAuthorizer{
			AuthorizerName: "kubernetes.io/always-allow-groups",
			Authorizer:     authorizerfactory.NewPrivilegedGroups(a.AlwaysAllowGroups...),
		})
	}
	if len(a.AlwaysAllowPaths) > 0 {
		paths, err := path.NewAuthorizer(a.AlwaysAllowPaths)
		if err != nil {
			return err
		}
		authorizers = append(authorizers, union.NamedAuthorizer{AuthorizerName: "kubernetes.io/always-allow-paths", Authorizer: paths})
	}
	if coreLite != nil {
		authorizers = append(authorizers,
			union.NamedAuthorizer{AuthorizerName: "Node", Authorizer: coreLite.NodeAuthorizer()},
			union.NamedAuthorizer{AuthorizerName: "RBAC", Authorizer: coreLite.RBACAuthorizer()})
	}
	authz, err := union.New(authorizers...)
	if err != nil {
		return err
	}
	info.Authorizer = authz
	return nil
}
