// Package role serves rbac.authorization.k8s.io/v1 Roles.
package role

import (
	"context"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/draplane/draplane/internal/auth/rbac"
	"github.com/draplane/draplane/internal/registry/core/internal/rbacstore"
	"github.com/draplane/draplane/internal/registry/internal/table"
)

// Strategy is the create, update and delete strategy of Roles.
var Strategy = rbacstore.NewStrategy(true, func(obj runtime.Object) field.ErrorList {
	return rbacstore.ValidateRules(obj.(*rbacv1.Role).Rules, false, field.NewPath("rules"))
}, nil)

// NewREST returns the storage of Roles; with escalation, a user may write
// only the rules it holds in the namespace (or may escalate roles).
func NewREST(optsGetter generic.RESTOptionsGetter, escalation *rbac.Escalation) (*rbacstore.Store, error) {
	var guard rbacstore.Guard
	if escalation != nil {
		guard = func(ctx context.Context, obj, old runtime.Object) error {
			role := obj.(*rbacv1.Role)
			if old != nil && reflect.DeepEqual(role.Rules, old.(*rbacv1.Role).Rules) {
				return nil
			}
			return escalation.ConfirmRole(ctx, rbacv1.Resource("roles"), role.Namespace, role.Name, role.Rules)
		}
	}
	return rbacstore.New(optsGetter, rbacstore.Kind{
		New:      func() runtime.Object { return &rbacv1.Role{} },
		NewList:  func() runtime.Object { return &rbacv1.RoleList{} },
		Resource: "roles", Singular: "role",
		Strategy: Strategy, Table: tableConvertor,
	}, guard)
}

var tableConvertor = table.Convertor[*rbacv1.Role]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Created At", Type: "date", Description: "Time at which the object was created"},
	},
	Row: func(role *rbacv1.Role) []interface{} {
		return []interface{}{role.Name, role.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
	},
}
