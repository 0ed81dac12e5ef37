package lease

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST serves leases.
type REST struct {
	patcherrors.Store
}

// NewREST returns the storage of leases.
func NewREST(optsGetter generic.RESTOptionsGetter) (*REST, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &coordinationv1.Lease{} },
		NewListFunc:               func() runtime.Object { return &coordinationv1.LeaseList{} },
		DefaultQualifiedResource:  coordinationv1.Resource("leases"),
		SingularQualifiedResource: coordinationv1.Resource("lease"),
		CreateStrategy:            Strategy,
		UpdateStrategy:            Strategy,
		DeleteStrategy:            Strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, err
	}
	return &REST{Store: patcherrors.Store{Store: store}}, nil
}

var tableConvertor = table.Convertor[*coordinationv1.Lease]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		table.AgeColumn,
	},
	Row: func(lease *coordinationv1.Lease) []interface{} {
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return []interface{}{lease.Name, holder, table.Age(lease.CreationTimestamp)}
	},
}
