package resourceclaimtemplate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// REST is the storage of ResourceClaimTemplates. It adds short names and
// categories to the generic store, which has neither.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST returns the etcd-backed storage of ResourceClaimTemplates. typer
// must know the internal and external types of resource.draplane.dev.
func NewREST(typer runtime.ObjectTyper, optsGetter generic.RESTOptionsGetter) (*REST, error) {
	strategy := NewStrategy(typer)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &resourceapi.ResourceClaimTemplate{} },
		NewListFunc:               func() runtime.Object { return &resourceapi.ResourceClaimTemplateList{} },
		DefaultQualifiedResource:  resourceapi.Resource("resourceclaimtemplates"),
		SingularQualifiedResource: resourceapi.Resource("resourceclaimtemplate"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor{},
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, fmt.Errorf("complete ResourceClaimTemplate storage: %w", err)
	}
	return &REST{Store: store}, nil
}

// ShortNames lets `kubectl get rct` work.
func (r *REST) ShortNames() []string { return []string{"rct"} }

// Categories puts templates into `kubectl get dra`.
func (r *REST) Categories() []string { return []string{"dra"} }

// tableConvertor renders the columns of `kubectl get resourceclaimtemplates`.
type tableConvertor struct{}

var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the template."},
	{Name: "Class", Type: "string", Description: "Device classes the requests name."},
	{Name: "Requests", Type: "integer", Description: "Number of device requests."},
	{Name: "Age", Type: "string", Description: "Time since creation."},
}

func (tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	var templates []resourceapi.ResourceClaimTemplate
	switch o := obj.(type) {
	case *resourceapi.ResourceClaimTemplate:
		templates = []resourceapi.ResourceClaimTemplate{*o}
	case *resourceapi.ResourceClaimTemplateList:
		templates = o.Items
	default:
		return nil, fmt.Errorf("cannot render %T as a ResourceClaimTemplate table", obj)
	}
	table := &metav1.Table{ColumnDefinitions: columns}
	if list, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = list.GetResourceVersion()
		table.Continue = list.GetContinue()
		table.RemainingItemCount = list.GetRemainingItemCount()
	}
	for i := range templates {
		template := &templates[i]
		requests := template.Spec.Spec.Devices.Requests
		table.Rows = append(table.Rows, metav1.TableRow{
			Object: runtime.RawExtension{Object: template},
			Cells: []interface{}{
				template.Name, classNames(requests), int64(len(requests)), age(template.CreationTimestamp),
			},
		})
	}
	return table, nil
}

func classNames(requests []resourceapi.DeviceRequest) string {
	seen := map[string]bool{}
	for _, request := range requests {
		if request.Exactly != nil && request.Exactly.DeviceClassName != "" {
			seen[request.Exactly.DeviceClassName] = true
		}
		for _, sub := range request.FirstAvailable {
			if sub.DeviceClassName != "" {
				seen[sub.DeviceClassName] = true
			}
		}
	}
	if len(seen) == 0 {
		return "<none>"
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func age(created metav1.Time) string {
	if created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(created.Time))
}
