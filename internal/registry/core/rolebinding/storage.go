// Package rolebinding serves rbac.authorization.k8s.io/v1 RoleBindings.
package rolebinding

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

// Strategy is the create, update and delete strategy of RoleBindings;
// roleRef cannot change.
var Strategy = rbacstore.NewStrategy(true, func(obj runtime.Object) field.ErrorList {
	binding := obj.(*rbacv1.RoleBinding)
	return rbacstore.ValidateBinding(binding.RoleRef, binding.Subjects, false)
}, func(obj, old runtime.Object) field.ErrorList {
	if ref, oldRef := obj.(*rbacv1.RoleBinding).RoleRef, old.(*rbacv1.RoleBinding).RoleRef; ref != oldRef {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
})

// NewREST returns the storage of RoleBindings; with escalation, a user
// may bind only a role whose rules it holds in the namespace (or may bind
// that role).
func NewREST(optsGetter generic.RESTOptionsGetter, escalation *rbac.Escalation) (*rbacstore.Store, error) {
	return rbacstore.New(optsGetter, rbacstore.Kind{
		New:      func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList:  func() runtime.Object { return &rbacv1.RoleBindingList{} },
		Resource: "rolebindings", Singular: "rolebinding",
		Strategy: Strategy, Table: tableConvertor,
	}, rbacstore.BindingGuard(escalation, "rolebindings", func(obj runtime.Object) (string, string, rbacv1.RoleRef, []rbacv1.Subject) {
		b := obj.(*rbacv1.RoleBinding)
		return b.Namespace, b.Name, b.RoleRef, b.Subjects
	}))
}

var tableConvertor = table.Convertor[*rbacv1.RoleBinding]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Role", Type: "string", Description: "The role the binding grants"},
		table.AgeColumn,
	},
	Row: func(binding *rbacv1.RoleBinding) []interface{} {
		return []interface{}{binding.Name, binding.RoleRef.Kind + "/" + binding.RoleRef.Name, table.Age(binding.CreationTimestamp)}
	},
}
