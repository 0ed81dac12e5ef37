package podgroup

import (
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/draplane/draplane/internal/registry/internal/statusrest"
	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST serves PodGroups.
type REST struct {
	patcherrors.Store
}

// StatusREST serves the status subresource.
type StatusREST = statusrest.REST

// Storage holds the PodGroup resource and its status.
type Storage struct {
	PodGroup *REST
	Status   *StatusREST
}

// NewStorage returns the storage of PodGroups and their status.
func NewStorage(optsGetter generic.RESTOptionsGetter) (*Storage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &schedulingv1beta1.PodGroup{} },
		NewListFunc:               func() runtime.Object { return &schedulingv1beta1.PodGroupList{} },
		DefaultQualifiedResource:  schedulingv1beta1.Resource("podgroups"),
		SingularQualifiedResource: schedulingv1beta1.Resource("podgroup"),
		CreateStrategy:            Strategy,
		UpdateStrategy:            Strategy,
		DeleteStrategy:            Strategy,
		ResetFieldsStrategy:       Strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, err
	}
	statusStore := *store
	statusStore.UpdateStrategy = StatusStrategy
	statusStore.ResetFieldsStrategy = StatusStrategy
	return &Storage{PodGroup: &REST{Store: patcherrors.Store{Store: store}}, Status: statusrest.New(&statusStore)}, nil
}

// ShortNames implements rest.ShortNamesProvider; upstream's is "pg".
func (r *REST) ShortNames() []string { return []string{"pg"} }

var tableConvertor = table.Convertor[*schedulingv1beta1.PodGroup]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Policy", Type: "string", Description: "The scheduling policy: Gang or Basic"},
		{Name: "Min-Count", Type: "string", Description: schedulingv1beta1.GangSchedulingPolicy{}.SwaggerDoc()["minCount"]},
		{Name: "Scheduled", Type: "string", Description: "The status of the PodGroupInitiallyScheduled condition (with its reason unless True)"},
		table.AgeColumn,
		{Name: "Topology", Type: "string", Priority: 1, Description: schedulingv1beta1.TopologyConstraint{}.SwaggerDoc()["key"]},
	},
	Row: func(group *schedulingv1beta1.PodGroup) []interface{} {
		minCount := "<none>"
		if gang := group.Spec.SchedulingPolicy.Gang; gang != nil {
			minCount = fmt.Sprint(gang.MinCount)
		}
		topology := "<none>"
		if c := group.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			topology = c.Topology[0].Key
		}
		return []interface{}{group.Name, Policy(group), minCount, scheduledColumn(group), table.Age(group.CreationTimestamp), topology}
	},
}
