// Package clusterrolebinding serves rbac.authorization.k8s.io/v1
// ClusterRoleBindings.
package clusterrolebinding

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/draplane/draplane/internal/auth/rbac"
	"github.com/draplane/draplane/internal/registry/core/internal/rbacstore"
	"github.com/draplane/draplane/internal/registry/internal/table"
)

// Strategy is the create, update and delete strategy of
// ClusterRoleBindings; roleRef cannot change.
var Strategy = rbacstore.NewStrategy(false, func(obj runtime.Object) field.ErrorList {
	binding := obj.(*rbacv1.ClusterRoleBinding)
	return rbacstore.ValidateBinding(binding.RoleRef, binding.Subjects, true)
}, func(obj, old runtime.Object) field.ErrorList {
	if ref, oldRef := obj.(*rbacv1.ClusterRoleBinding).RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef; ref != oldRef {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
})

// NewREST returns the storage of ClusterRoleBindings; with escalation, a
// user may bind only a ClusterRole whose rules it holds cluster-wide (or
// may bind that role).
func NewREST(optsGetter generic.RESTOptionsGetter, escalation *rbac.Escalation) (*rbacstore.Store, error) {
	return rbacstore.New(optsGetter, rbacstore.Kind{
		New:      func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewList:  func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		Resource: "clusterrolebindings", Singular: "clusterrolebinding",
		Strategy: Strategy, Table: tableConvertor,
	}, rbacstore.BindingGuard(escalation, "clusterrolebindings", func(obj runtime.Object) (string, string, rbacv1.RoleRef, []rbacv1.Subject) {
		b := obj.(*rbacv1.ClusterRoleBinding)
		return "", b.Name, b.RoleRef, b.Subjects
	}))
}

var tableConvertor = table.Convertor[*rbacv1.ClusterRoleBinding]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Role", Type: "string", Description: "The role the binding grants"},
		table.AgeColumn,
	},
	Row: func(binding *rbacv1.ClusterRoleBinding) []interface{} {
		return []interface{}{binding.Name, binding.RoleRef.Kind + "/" + binding.RoleRef.Name, table.Age(binding.CreationTimestamp)}
	},
}
