package resourceclaimtemplate

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
	"github.com/draplane/draplane/internal/registry/resourceclaim"
)

// REST is the storage of ResourceClaimTemplates. It adds short names and
// categories to the generic store, which has neither.
type REST struct {
	patcherrors.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST returns the etcd-backed storage of ResourceClaimTemplates. typer
// must know the internal and external types of resource.draplane.dev;
// adminAccess says where admin access is allowed.
func NewREST(typer runtime.ObjectTyper, optsGetter generic.RESTOptionsGetter, adminAccess resourceclaim.AdminAccess) (*REST, error) {
	strategy := NewStrategy(typer, adminAccess)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &resourceapi.ResourceClaimTemplate{} },
		NewListFunc:               func() runtime.Object { return &resourceapi.ResourceClaimTemplateList{} },
		DefaultQualifiedResource:  resourceapi.Resource("resourceclaimtemplates"),
		SingularQualifiedResource: resourceapi.Resource("resourceclaimtemplate"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, fmt.Errorf("complete ResourceClaimTemplate storage: %w", err)
	}
	return &REST{Store: patcherrors.Store{Store: store}}, nil
}

// ShortNames lets `kubectl get rct` work.
func (r *REST) ShortNames() []string { return []string{"rct"} }

// Categories puts templates into `kubectl get dra`.
func (r *REST) Categories() []string { return []string{"dra"} }

// tableConvertor renders the columns of `kubectl get resourceclaimtemplates`.
var tableConvertor = table.Convertor[*resourceapi.ResourceClaimTemplate]{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the template."},
		{Name: "Class", Type: "string", Description: "Device classes the requests name."},
		{Name: "Requests", Type: "integer", Description: "Number of device requests."},
		{Name: "Age", Type: "string", Description: "Time since creation."},
	},
	Row: func(template *resourceapi.ResourceClaimTemplate) []interface{} {
		return []interface{}{
			template.Name, table.JoinOrNone(resourceclaim.ClassNames(template.Spec.Spec)),
			int64(len(template.Spec.Spec.Devices.Requests)), table.Age(template.CreationTimestamp),
		}
	},
}
