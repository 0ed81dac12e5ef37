package devicetaintrule

import (
	"fmt"
	"strings"

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

// REST is the storage of DeviceTaintRules. It adds short names and
// categories to the generic store, which has neither.
type REST struct {
	patcherrors.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST returns the etcd-backed storage of DeviceTaintRules and of their
// status subresource. typer must know the internal and external types of
// resource.draplane.dev.
func NewREST(typer runtime.ObjectTyper, optsGetter generic.RESTOptionsGetter) (*REST, *StatusREST, error) {
	strategy := NewStrategy(typer)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &resourceapi.DeviceTaintRule{} },
		NewListFunc:               func() runtime.Object { return &resourceapi.DeviceTaintRuleList{} },
		DefaultQualifiedResource:  resourceapi.Resource("devicetaintrules"),
		SingularQualifiedResource: resourceapi.Resource("devicetaintrule"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter}); err != nil {
		return nil, nil, fmt.Errorf("complete DeviceTaintRule storage: %w", err)
	}

	statusStore := *store
	status := NewStatusStrategy(typer)
	statusStore.UpdateStrategy = status
	statusStore.ResetFieldsStrategy = status
	return &REST{Store: patcherrors.Store{Store: store}}, statusrest.New(&statusStore), nil
}

// ShortNames lets `kubectl get dtr` work.
func (r *REST) ShortNames() []string { return []string{"dtr"} }

// Categories puts rules into `kubectl get dra`.
func (r *REST) Categories() []string { return []string{"dra"} }

// StatusREST serves the status subresource.
type StatusREST = statusrest.REST

// tableConvertor renders the columns of `kubectl get devicetaintrules`.
var tableConvertor = table.Convertor[*resourceapi.DeviceTaintRule]{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the rule."},
		{Name: "Effect", Type: "string", Description: "Effect of the taint."},
		{Name: "Taint", Type: "string", Description: "Taint as key=value."},
		{Name: "Selector", Type: "string", Description: "Devices the rule taints, as driver/pool/device; * matches any."},
		{Name: "Age", Type: "string", Description: "Time since creation."},
	},
	Row: func(rule *resourceapi.DeviceTaintRule) []interface{} {
		taint := rule.Spec.Taint.Key
		if rule.Spec.Taint.Value != "" {
			taint += "=" + rule.Spec.Taint.Value
		}
		return []interface{}{
			rule.Name, string(rule.Spec.Taint.Effect), taint, selectorString(rule.Spec.DeviceSelector), table.Age(rule.CreationTimestamp),
		}
	},
}

// selectorString renders a selector as driver/pool/device with * for
// fields that are not set.
func selectorString(selector *resourceapi.DeviceTaintSelector) string {
	if selector == nil {
		return "*/*/*"
	}
	part := func(value *string) string {
		if value == nil || *value == "" {
			return "*"
		}
		return *value
	}
	return strings.Join([]string{part(selector.Driver), part(selector.Pool), part(selector.Device)}, "/")
}
