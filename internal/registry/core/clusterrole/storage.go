// Package clusterrole serves rbac.authorization.k8s.io/v1 ClusterRoles.
package clusterrole

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

// Strategy is the create, update and delete strategy of ClusterRoles.
var Strategy = rbacstore.NewStrategy(false, func(obj runtime.Object) field.ErrorList {
	role := obj.(*rbacv1.ClusterRole)
	allErrs := rbacstore.ValidateRules(role.Rules, true, field.NewPath("rules"))
	return append(allErrs, rbacstore.ValidateAggregationRule(role.AggregationRule, field.NewPath("aggregationRule"))...)
}, nil)

// NewREST returns the storage of ClusterRoles; with escalation, a user
// may write only the rules it holds cluster-wide (or may escalate
// clusterroles, which an aggregation rule also needs).
func NewREST(optsGetter generic.RESTOptionsGetter, escalation *rbac.Escalation) (*rbacstore.Store, error) {
	var guard rbacstore.Guard
	if escalation != nil {
		guard = func(ctx context.Context, obj, old runtime.Object) error {
			role := obj.(*rbacv1.ClusterRole)
			var oldRole *rbacv1.ClusterRole
			if old != nil {
				oldRole = old.(*rbacv1.ClusterRole)
			}
			if role.AggregationRule != nil && (oldRole == nil || !reflect.DeepEqual(role.AggregationRule, oldRole.AggregationRule)) {
				if err := escalation.ConfirmAggregation(ctx, role.Name); err != nil {
					return err
				}
			}
			if oldRole != nil && reflect.DeepEqual(role.Rules, oldRole.Rules) {
				return nil
			}
			if role.AggregationRule != nil {
				// The aggregation controller owns the rules of an
				// aggregated role; writing the rule itself was confirmed.
				return nil
			}
			return escalation.ConfirmRole(ctx, rbacv1.Resource("clusterroles"), "", role.Name, role.Rules)
		}
	}
	return rbacstore.New(optsGetter, rbacstore.Kind{
		New:      func() runtime.Object { return &rbacv1.ClusterRole{} },
		NewList:  func() runtime.Object { return &rbacv1.ClusterRoleList{} },
		Resource: "clusterroles", Singular: "clusterrole",
		Strategy: Strategy, Table: tableConvertor,
	}, guard)
}

var tableConvertor = table.Convertor[*rbacv1.ClusterRole]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Created At", Type: "date", Description: "Time at which the object was created"},
	},
	Row: func(role *rbacv1.ClusterRole) []interface{} {
		return []interface{}{role.Name, role.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
	},
}
