package resourceslice

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/internal/updatecheck"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST is the storage of ResourceSlices. It adds short names and
// categories to the generic store, which has neither, and runs the check
// of updates it was given.
type REST struct {
	patcherrors.Store
	updateCheck rest.ValidateObjectUpdateFunc
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST returns the etcd-backed storage of ResourceSlices. typer must
// know the internal and external types of resource.draplane.dev.
// updateCheck, when set, refuses updates as validating admission would
// (package updatecheck): the node restriction of slices' node and driver.
func NewREST(typer runtime.ObjectTyper, optsGetter generic.RESTOptionsGetter, updateCheck rest.ValidateObjectUpdateFunc) (*REST, error) {
	strategy := NewStrategy(typer)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &resourceapi.ResourceSlice{} },
		NewListFunc:               func() runtime.Object { return &resourceapi.ResourceSliceList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  resourceapi.Resource("resourceslices"),
		SingularQualifiedResource: resourceapi.Resource("resourceslice"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor,
	}
	options := &generic.StoreOptions{
		RESTOptions: optsGetter,
		AttrFunc:    GetAttrs,
		TriggerFunc: storage.IndexerFuncs{resourceapi.ResourceSliceSelectorNodeName: nodeNameTriggerFunc},
		Indexers:    indexers(),
	}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("complete ResourceSlice storage: %w", err)
	}
	return &REST{Store: patcherrors.Store{Store: store}, updateCheck: updateCheck}, nil
}

// Update runs the check of updates before the handlers' validating
// admission.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, objInfo, createValidation, updatecheck.Before(r.updateCheck, updateValidation), forceAllowCreate, options)
}

// ShortNames lets `kubectl get rsl` work.
func (r *REST) ShortNames() []string { return []string{"rsl"} }

// Categories puts slices into `kubectl get dra`.
func (r *REST) Categories() []string { return []string{"dra"} }

// tableConvertor renders the columns of `kubectl get resourceslices`.
var tableConvertor = table.Convertor[*resourceapi.ResourceSlice]{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the slice."},
		{Name: "Node", Type: "string", Description: "Node the devices are local to; <none> for network-attached pools."},
		{Name: "Driver", Type: "string", Description: "Driver that publishes the slice."},
		{Name: "Pool", Type: "string", Description: "Pool the slice belongs to."},
		{Name: "Devices", Type: "integer", Description: "Number of devices in the slice."},
		{Name: "Age", Type: "string", Description: "Time since creation."},
		{Name: "Generation", Type: "integer", Priority: 1, Description: "Pool generation."},
	},
	Row: func(slice *resourceapi.ResourceSlice) []interface{} {
		node := "<none>"
		switch {
		case slice.Spec.NodeName != nil && *slice.Spec.NodeName != "":
			node = *slice.Spec.NodeName
		case slice.Spec.AllNodes != nil && *slice.Spec.AllNodes:
			node = "<all>"
		case slice.Spec.NodeSelector != nil:
			node = "<selector>"
		}
		return []interface{}{
			slice.Name, node, slice.Spec.Driver, slice.Spec.Pool.Name,
			int64(len(slice.Spec.Devices)), table.Age(slice.CreationTimestamp), slice.Spec.Pool.Generation,
		}
	},
}
