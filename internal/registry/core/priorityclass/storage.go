package priorityclass

import (
	"context"
	"errors"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST serves PriorityClasses.
type REST struct {
	patcherrors.Store
}

// NewREST returns the storage of PriorityClasses.
func NewREST(optsGetter generic.RESTOptionsGetter) (*REST, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewListFunc:               func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		DefaultQualifiedResource:  schedulingv1.Resource("priorityclasses"),
		SingularQualifiedResource: schedulingv1.Resource("priorityclass"),
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

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return []string{"pc"} }

// Delete refuses to delete a system class.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	for _, spc := range SystemPriorityClasses() {
		if name == spc.Name {
			return nil, false, apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), spc.Name, errors.New("this is a system priority class and cannot be deleted"))
		}
	}
	return r.Store.Delete(ctx, name, deleteValidation, options)
}

// Create refuses a second global default class.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.Store.Create(ctx, obj, func(ctx context.Context, obj runtime.Object) error {
		if createValidation != nil {
			if err := createValidation(ctx, obj); err != nil {
				return err
			}
		}
		return r.checkGlobalDefault(ctx, obj.(*schedulingv1.PriorityClass), true)
	}, options)
}

// Update refuses to mark a class the global default while another is.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, objInfo, createValidation, func(ctx context.Context, obj, old runtime.Object) error {
		if updateValidation != nil {
			if err := updateValidation(ctx, obj, old); err != nil {
				return err
			}
		}
		return r.checkGlobalDefault(ctx, obj.(*schedulingv1.PriorityClass), false)
	}, forceAllowCreate, options)
}

// checkGlobalDefault is the validation phase of upstream's Priority
// admission: only one class may be the global default.
func (r *REST) checkGlobalDefault(ctx context.Context, pc *schedulingv1.PriorityClass, create bool) error {
	if !pc.GlobalDefault {
		return nil
	}
	list, err := r.Store.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %v", err)
	}
	var classes []*schedulingv1.PriorityClass
	for i := range list.(*schedulingv1.PriorityClassList).Items {
		classes = append(classes, &list.(*schedulingv1.PriorityClassList).Items[i])
	}
	if dpc := lowestDefault(classes); dpc != nil && (create || dpc.Name != pc.Name) {
		return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), pc.Name, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", dpc.Name))
	}
	return nil
}

var descriptions = schedulingv1.PriorityClass{}.SwaggerDoc()

var tableConvertor = table.Convertor[*schedulingv1.PriorityClass]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Value", Type: "integer", Description: descriptions["value"]},
		{Name: "Global-Default", Type: "boolean", Description: descriptions["globalDefault"]},
		table.AgeColumn,
		{Name: "PreemptionPolicy", Type: "string", Description: descriptions["preemptionPolicy"]},
	},
	Row: func(pc *schedulingv1.PriorityClass) []interface{} {
		policy := "<none>"
		if pc.PreemptionPolicy != nil {
			policy = string(*pc.PreemptionPolicy)
		}
		return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, table.Age(pc.CreationTimestamp), policy}
	},
}
