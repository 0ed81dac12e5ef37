package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/draplane/draplane/internal/registry/internal/statusrest"
	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST serves namespaces. It wraps the generic store because deleting a
// namespace with finalizers first moves it to the Terminating phase.
type REST struct {
	patcherrors.Store
}

// StatusREST serves the status subresource.
type StatusREST = statusrest.REST

// FinalizeREST serves the finalize subresource of namespaces.
type FinalizeREST struct {
	store *genericregistry.Store
}

// Storage holds the namespace resource and its subresources.
type Storage struct {
	Namespace *REST
	Status    *StatusREST
	Finalize  *FinalizeREST
}

// NewStorage returns the storage of namespaces and their subresources.
func NewStorage(optsGetter generic.RESTOptionsGetter) (*Storage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &corev1.Namespace{} },
		NewListFunc:               func() runtime.Object { return &corev1.NamespaceList{} },
		DefaultQualifiedResource:  corev1.Resource("namespaces"),
		SingularQualifiedResource: corev1.Resource("namespace"),
		PredicateFunc:             Matcher,
		CreateStrategy:            Strategy,
		UpdateStrategy:            Strategy,
		DeleteStrategy:            Strategy,
		ResetFieldsStrategy:       Strategy,
		ReturnDeletedObject:       true,
		ShouldDeleteDuringUpdate:  shouldDeleteDuringUpdate,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return nil, err
	}
	statusStore := *store
	statusStore.UpdateStrategy = StatusStrategy
	statusStore.ResetFieldsStrategy = StatusStrategy
	finalizeStore := *store
	finalizeStore.UpdateStrategy = FinalizeStrategy
	finalizeStore.ResetFieldsStrategy = FinalizeStrategy
	return &Storage{
		Namespace: &REST{Store: patcherrors.Store{Store: store}},
		Status:    statusrest.New(&statusStore),
		Finalize:  &FinalizeREST{&finalizeStore},
	}, nil
}

// shouldDeleteDuringUpdate removes a terminating namespace from storage as
// soon as an update leaves it without any finalizer.
func shouldDeleteDuringUpdate(ctx context.Context, key string, obj, existing runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return false
	}
	return ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) == 0 &&
		genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
}

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return []string{"ns"} }

// Delete marks a namespace that still has spec finalizers as Terminating
// (setting its deletionTimestamp) and leaves it in place; only a namespace
// whose finalizers are all gone is removed from storage.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	preconditions := storage.Preconditions{}
	if options.Preconditions != nil {
		preconditions.UID = options.Preconditions.UID
		preconditions.ResourceVersion = options.Preconditions.ResourceVersion
	}
	if preconditions.UID != nil && *preconditions.UID != ns.UID {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *preconditions.UID, ns.UID))
	}
	if preconditions.ResourceVersion != nil && *preconditions.ResourceVersion != ns.ResourceVersion {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *preconditions.ResourceVersion, ns.ResourceVersion))
	}

	if ns.DeletionTimestamp.IsZero() && len(ns.Spec.Finalizers) > 0 {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
		key, err := r.KeyFunc(ctx, name)
		if err != nil {
			return nil, false, err
		}
		out := r.NewFunc()
		dryRun := len(options.DryRun) > 0
		err = r.Storage.GuaranteedUpdate(ctx, key, out, false, &preconditions,
			storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
				existingNS := existing.(*corev1.Namespace)
				if existingNS.DeletionTimestamp.IsZero() {
					now := metav1.Now()
					existingNS.DeletionTimestamp = &now
				}
				existingNS.Status.Phase = corev1.NamespaceTerminating
				return existingNS, nil
			}), dryRun, nil)
		if err != nil {
			return nil, false, storeerr.InterpretUpdateError(err, r.DefaultQualifiedResource, name)
		}
		return out, false, nil
	}
	if len(ns.Spec.Finalizers) > 0 {
		// Already terminating: the namespace controller finishes the job.
		return ns, false, nil
	}
	return r.Store.Delete(ctx, name, deleteValidation, options)
}

// New returns an empty namespace.
func (r *FinalizeREST) New() runtime.Object { return &corev1.Namespace{} }

// Destroy does nothing: the main store owns the storage.
func (r *FinalizeREST) Destroy() {}

// Update changes only spec.finalizers of a namespace; a terminating
// namespace left without finalizers is deleted.
func (r *FinalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (r *FinalizeREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

var tableConvertor = table.Convertor[*corev1.Namespace]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Status", Type: "string", Description: corev1.NamespaceStatus{}.SwaggerDoc()["phase"]},
		table.AgeColumn,
	},
	Row: func(ns *corev1.Namespace) []interface{} {
		return []interface{}{ns.Name, string(ns.Status.Phase), table.Age(ns.CreationTimestamp)}
	},
}
