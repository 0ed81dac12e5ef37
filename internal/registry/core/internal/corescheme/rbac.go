package corescheme

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group versions of standalone authorization, and their internal twins.
var (
	RBACV1                 = rbacv1.SchemeGroupVersion
	RBACInternal           = schema.GroupVersion{Group: rbacv1.GroupName, Version: runtime.APIVersionInternal}
	AuthorizationV1        = authorizationv1.SchemeGroupVersion
	AuthorizationInternal  = schema.GroupVersion{Group: authorizationv1.GroupName, Version: runtime.APIVersionInternal}
	AuthenticationV1       = authenticationv1.SchemeGroupVersion
	AuthenticationInternal = schema.GroupVersion{Group: authenticationv1.GroupName, Version: runtime.APIVersionInternal}
)

// addAuthToScheme registers rbac.authorization.k8s.io/v1 and the self
// reviews of authorization.k8s.io/v1 and authentication.k8s.io/v1.
func addAuthToScheme(scheme *runtime.Scheme) error {
	rbacTypes := func() []runtime.Object {
		return []runtime.Object{
			&rbacv1.Role{}, &rbacv1.RoleList{},
			&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleList{},
			&rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{},
			&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRoleBindingList{},
		}
	}
	scheme.AddKnownTypes(RBACV1, rbacTypes()...)
	scheme.AddKnownTypes(RBACInternal, rbacTypes()...)
	metav1.AddToGroupVersion(scheme, RBACV1)

	authorizationTypes := func() []runtime.Object {
		return []runtime.Object{&authorizationv1.SelfSubjectAccessReview{}, &authorizationv1.SelfSubjectRulesReview{}}
	}
	scheme.AddKnownTypes(AuthorizationV1, authorizationTypes()...)
	scheme.AddKnownTypes(AuthorizationInternal, authorizationTypes()...)
	metav1.AddToGroupVersion(scheme, AuthorizationV1)

	scheme.AddKnownTypes(AuthenticationV1, &authenticationv1.SelfSubjectReview{})
	scheme.AddKnownTypes(AuthenticationInternal, &authenticationv1.SelfSubjectReview{})
	metav1.AddToGroupVersion(scheme, AuthenticationV1)
	return nil
}
