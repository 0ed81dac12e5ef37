// Package clusterrolebinding serves rbac.authorization.k8s.io/v1 ClusterRoleBindings.
package clusterrolebinding

import (
	"context"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/draplane/draplane/auth/rbac"
	"github.com/draplane/draplane/registry/core/internal/rbacstore"
	"github.com/draplane/draplane/registry/internal/table"
	"github.com/draplane/draplane/registry/patcherrors"
)

// Strategy is the create, update and delete strategy of ClusterRoleBindings;
// roleRef cannot change.
var Strategy = rbacstore.NewStrategy(false, func(obj runtime.Object) field.ErrorList {
	binding := obj.(*rbacv1.ClusterRoleBinding)
	return rbacstore.ValidateBinding(binding.RoleRef, binding.Subjects, true)
}, func(obj, old runtime.Object) field.ErrorList {
	if ref, oldRef := obj.(*rbacv1.ClusterRoleBinding).RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef; ref != oldRef {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
})

// NewREST returns the storage of ClusterRoleBindings; with escalation, a user
// may bind only a role whose rules it holds cluster-wide (or may bind
// that role).
func NewREST(optsGetter generic.RESTOptionsGetter, escalation *rbac.Escalation) (*rbacstore.Store, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
		NewListFunc:               func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
		DefaultQualifiedResource:  rbacv1.Resource("clusterrolebindings"),
		SingularQualifiedResource: rbacv1.Resource("clusterrolebinding"),
		CreateStrategy:            Strategy,
		UpdateStrategy:            Strategy,
		DeleteStrategy:            Strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, err
	}
	rest := &rbacstore.Store{Store: patcherrors.Store{Store: store}}
	if escalation != nil {
		rest.Guard = func(ctx context.Context, obj, old runtime.Object) error {
			binding := obj.(*rbacv1.ClusterRoleBinding)
			if old != nil {
				if o := old.(*rbacv1.ClusterRoleBinding); o.RoleRef == binding.RoleRef && reflect.DeepEqual(o.Subjects, binding.Subjects) {
					return nil
				}
			}
			return escalation.ConfirmBinding(ctx, rbacv1.Resource("clusterrolebindings"), "", binding.Name, binding.RoleRef)
		}
	}
	return rest, nil
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
