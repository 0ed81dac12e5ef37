package resourceclaim

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/registry/internal/table"

	"github.com/draplane/draplane/internal/registry/internal/statusrest"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST is the storage of ResourceClaims. It adds short names and
// categories to the generic store, which has neither.
type REST struct {
	patcherrors.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST returns the etcd-backed storage of ResourceClaims and of their
// status subresource. typer must know the internal and external types of
// resource.draplane.dev; adminAccess says where admin access is allowed.
// statusUpdateCheck, when set, refuses status updates as validating
// admission would (package updatecheck): the node restriction of what a
// node may change in a claim's status.
func NewREST(typer runtime.ObjectTyper, optsGetter generic.RESTOptionsGetter, adminAccess AdminAccess, statusUpdateCheck rest.ValidateObjectUpdateFunc) (*REST, *StatusREST, error) {
	strategy := NewStrategy(typer, adminAccess)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &resourceapi.ResourceClaim{} },
		NewListFunc:               func() runtime.Object { return &resourceapi.ResourceClaimList{} },
		DefaultQualifiedResource:  resourceapi.Resource("resourceclaims"),
		SingularQualifiedResource: resourceapi.Resource("resourceclaim"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, nil, fmt.Errorf("complete ResourceClaim storage: %w", err)
	}

	statusStore := *store
	status := NewStatusStrategy(typer, adminAccess)
	statusStore.UpdateStrategy = status
	statusStore.ResetFieldsStrategy = status
	return &REST{Store: patcherrors.Store{Store: store}}, statusrest.NewWithUpdateCheck(&statusStore, statusUpdateCheck), nil
}

// ShortNames lets `kubectl get rcl` work.
func (r *REST) ShortNames() []string { return []string{"rcl"} }

// Categories puts claims into `kubectl get dra`.
func (r *REST) Categories() []string { return []string{"dra"} }

// StatusREST serves the status subresource.
type StatusREST = statusrest.REST

// tableConvertor renders the columns of `kubectl get resourceclaims`.
var tableConvertor = table.Convertor[*resourceapi.ResourceClaim]{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the claim."},
		{Name: "State", Type: "string", Description: "pending, allocated or allocated,reserved; ,deleted while being deleted."},
		{Name: "Class", Type: "string", Description: "Device classes the requests name."},
		{Name: "Age", Type: "string", Description: "Time since creation."},
		{Name: "Reserved For", Type: "string", Priority: 1, Description: "Consumers the claim is reserved for."},
		{Name: "Devices", Type: "string", Priority: 1, Description: "Allocated devices as driver/pool/device."},
	},
	Row: func(claim *resourceapi.ResourceClaim) []interface{} {
		var consumers []string
		for _, ref := range claim.Status.ReservedFor {
			consumers = append(consumers, ref.Resource+"/"+ref.Name)
		}
		var devices []string
		if claim.Status.Allocation != nil {
			for _, result := range claim.Status.Allocation.Devices.Results {
				devices = append(devices, result.Driver+"/"+result.Pool+"/"+result.Device)
			}
		}
		return []interface{}{
			claim.Name, ClaimState(claim), table.JoinOrNone(ClassNames(claim.Spec)), table.Age(claim.CreationTimestamp),
			table.JoinOrNone(consumers), table.JoinOrNone(devices),
		}
	},
}

// ClassNames returns the sorted, distinct device classes a claim spec
// names, in exact requests and in firstAvailable alternatives.
func ClassNames(spec resourceapi.ResourceClaimSpec) []string {
	seen := map[string]bool{}
	for _, request := range spec.Devices.Requests {
		if request.Exactly != nil {
			seen[request.Exactly.DeviceClassName] = true
		}
		for _, sub := range request.FirstAvailable {
			seen[sub.DeviceClassName] = true
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		if name != "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
