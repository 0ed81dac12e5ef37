// Package statusrest serves the status subresource of a generic store:
// get, update and patch of the whole object through status strategies that
// keep the spec, never create.
package statusrest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/draplane/draplane/internal/registry/internal/updatecheck"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST is the status subresource of one resource.
type REST struct {
	store       *genericregistry.Store
	updateCheck rest.ValidateObjectUpdateFunc
}

var (
	_ rest.Getter              = &REST{}
	_ rest.Updater             = &REST{}
	_ rest.Patcher             = &REST{}
	_ rest.ResetFieldsStrategy = &REST{}
	_ rest.TableConvertor      = &REST{}
)

// New serves status through store, a copy of the resource's store whose
// update and reset-fields strategies are the status ones.
func New(store *genericregistry.Store) *REST { return &REST{store: store} }

// NewWithUpdateCheck is New whose updates also pass check, where the API
// handlers run validating admission (package updatecheck).
func NewWithUpdateCheck(store *genericregistry.Store, check rest.ValidateObjectUpdateFunc) *REST {
	return &REST{store: store, updateCheck: check}
}

// New returns an empty object of the resource.
func (r *REST) New() runtime.Object { return r.store.NewFunc() }

// Destroy does nothing: the main resource owns the shared storage.
func (r *REST) Destroy() {}

// Get returns the object, status included.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes the status; it never creates an object. A patch that
// cannot be applied is answered with the field it fails at.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, patcherrors.Guard(objInfo), createValidation, updatecheck.Before(r.updateCheck, updateValidation), false, options)
}

// GetResetFields names the fields a status write leaves alone.
func (r *REST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable renders the object as the main resource does.
func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}
