package rbacstore

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

// Strategy is the create, update and delete strategy of one RBAC kind:
// no status, no generation; Spec validates what is not metadata, and
// Update (optional) what only an update can get wrong.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	Namespaced bool
	Spec       func(obj runtime.Object) field.ErrorList
	Update     func(obj, old runtime.Object) field.ErrorList
}

// NewStrategy returns the strategy of one RBAC kind.
func NewStrategy(namespaced bool, spec func(runtime.Object) field.ErrorList, update func(obj, old runtime.Object) field.ErrorList) Strategy {
	return Strategy{ObjectTyper: corescheme.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: namespaced, Spec: spec, Update: update}
}

func (s Strategy) NamespaceScoped() bool                                         { return s.Namespaced }
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object)      {}
func (s Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}
func (s Strategy) Canonicalize(obj runtime.Object)                               {}
func (s Strategy) AllowCreateOnUpdate(ctx context.Context) bool                  { return true }
func (s Strategy) AllowUnconditionalUpdate(ctx context.Context) bool             { return true }
func (s Strategy) WarningsOnCreate(context.Context, runtime.Object) []string     { return nil }
func (s Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// Validate implements rest.RESTCreateStrategy.
func (s Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	allErrs := apimachineryvalidation.ValidateObjectMetaAccessor(accessor, s.Namespaced, ValidateName, field.NewPath("metadata"))
	return append(allErrs, s.Spec(obj)...)
}

// ValidateUpdate implements rest.RESTUpdateStrategy.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	oldAccessor, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	allErrs := apimachineryvalidation.ValidateObjectMetaAccessorUpdate(accessor, oldAccessor, field.NewPath("metadata"))
	allErrs = append(allErrs, s.Spec(obj)...)
	if s.Update != nil {
		allErrs = append(allErrs, s.Update(obj, old)...)
	}
	return allErrs
}
