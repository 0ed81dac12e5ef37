package rbacstore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/registry/patcherrors"
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
