package rbacstore

import (
	"context"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/auth/rbac"

	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// Guard returns an error (a 403) when writing obj, which replaces old
// (nil on create), would grant the user in ctx rules it does not hold.
type Guard func(ctx context.Context, obj, old runtime.Object) error

// Store is a role or binding store whose creates and updates pass the
// Guard first.
type Store struct {
	patcherrors.Store
	Guard Guard
}

// Create implements rest.Creater.
func (s *Store) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	if s.Guard != nil {
		if err := s.Guard(ctx, obj, nil); err != nil {
			return nil, err
		}
	}
	return s.Store.Create(ctx, obj, createValidation, options)
}

// Update implements rest.Updater; the guard sees the object as the update
// makes it, also when the update creates it.
func (s *Store) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	if s.Guard != nil {
		objInfo = rest.WrapUpdatedObjectInfo(objInfo, func(ctx context.Context, obj, old runtime.Object) (runtime.Object, error) {
			if err := s.Guard(ctx, obj, old); err != nil {
				return nil, err
			}
			return obj, nil
		})
	}
	return s.Store.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
}

// Kind is what tells one RBAC kind's store from another's.
type Kind struct {
	New, NewList       func() runtime.Object
	Resource, Singular string
	Strategy           Strategy
	Table              rest.TableConvertor
}

// New returns the store of one RBAC kind; guard may be nil.
func New(optsGetter generic.RESTOptionsGetter, kind Kind, guard Guard) (*Store, error) {
	store := &genericregistry.Store{
		NewFunc:                   kind.New,
		NewListFunc:               kind.NewList,
		DefaultQualifiedResource:  rbacv1.Resource(kind.Resource),
		SingularQualifiedResource: rbacv1.Resource(kind.Singular),
		CreateStrategy:            kind.Strategy,
		UpdateStrategy:            kind.Strategy,
		DeleteStrategy:            kind.Strategy,
		TableConvertor:            kind.Table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, err
	}
	return &Store{Store: patcherrors.Store{Store: store}, Guard: guard}, nil
}

// Binding is what the guard of a binding kind reads from its objects.
type Binding func(obj runtime.Object) (namespace, name string, roleRef rbacv1.RoleRef, subjects []rbacv1.Subject)

// BindingGuard confirms that the writer of a binding may bind its role,
// when the binding is new or its subjects change (roleRef cannot).
func BindingGuard(escalation *rbac.Escalation, resource string, binding Binding) Guard {
	if escalation == nil {
		return nil
	}
	return func(ctx context.Context, obj, old runtime.Object) error {
		namespace, name, roleRef, subjects := binding(obj)
		if old != nil {
			_, _, oldRef, oldSubjects := binding(old)
			if oldRef == roleRef && reflect.DeepEqual(oldSubjects, subjects) {
				return nil
			}
		}
		return escalation.ConfirmBinding(ctx, rbacv1.Resource(resource), namespace, name, roleRef)
	}
}
