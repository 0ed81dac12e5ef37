package deviceclass

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST is the storage of DeviceClasses. It adds short names and categories
// to the generic store, which has neither.
type REST struct {
	patcherrors.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST returns the etcd-backed storage of DeviceClasses. typer must
// know the internal and external types of resource.draplane.dev.
func NewREST(typer runtime.ObjectTyper, optsGetter generic.RESTOptionsGetter) (*REST, error) {
	strategy := NewStrategy(typer)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &resourceapi.DeviceClass{} },
		NewListFunc:               func() runtime.Object { return &resourceapi.DeviceClassList{} },
		DefaultQualifiedResource:  resourceapi.Resource("deviceclasses"),
		SingularQualifiedResource: resourceapi.Resource("deviceclass"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, fmt.Errorf("complete DeviceClass storage: %w", err)
	}
	return &REST{Store: patcherrors.Store{Store: store}}, nil
}

// ShortNames lets `kubectl get dvc` work.
func (r *REST) ShortNames() []string { return []string{"dvc"} }

// Categories puts classes into `kubectl get dra`.
func (r *REST) Categories() []string { return []string{"dra"} }

// tableConvertor renders the columns of `kubectl get deviceclasses`.
var tableConvertor = table.Convertor[*resourceapi.DeviceClass]{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the class."},
		{Name: "Selectors", Type: "integer", Description: "Number of device selectors."},
		{Name: "Extended Resource", Type: "string", Description: "Extended resource name that maps to this class, if any."},
		{Name: "Age", Type: "string", Description: "Time since creation."},
	},
	Row: func(class *resourceapi.DeviceClass) []interface{} {
		extended := "<none>"
		if class.Spec.ExtendedResourceName != nil {
			extended = *class.Spec.ExtendedResourceName
		}
		return []interface{}{class.Name, int64(len(class.Spec.Selectors)), extended, table.Age(class.CreationTimestamp)}
	},
}
