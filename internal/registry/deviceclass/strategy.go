// Package deviceclass holds the behaviour (strategy) and the storage of
// DeviceClasses: cluster-scoped, admin-defined sets of devices that
// requests refer to by name.
package deviceclass

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/validation"
)

// classStrategy implements create, update and delete behaviour.
type classStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the strategy for DeviceClasses; typer must know the
// internal and external types of resource.draplane.dev.
func NewStrategy(typer runtime.ObjectTyper) classStrategy {
	return classStrategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

func (classStrategy) NamespaceScoped() bool { return false }

func (classStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*resourceapi.DeviceClass).Generation = 1
}

func (classStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateDeviceClass(obj.(*resourceapi.DeviceClass))
}

func (classStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (classStrategy) Canonicalize(obj runtime.Object) {}

func (classStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// PrepareForUpdate bumps the generation when the spec changed: allocations
// made against an older generation may no longer match the class.
func (classStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	class := obj.(*resourceapi.DeviceClass)
	oldClass := old.(*resourceapi.DeviceClass)
	if !apiequality.Semantic.DeepEqual(class.Spec, oldClass.Spec) {
		class.Generation = oldClass.Generation + 1
	}
}

func (classStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateDeviceClassUpdate(obj.(*resourceapi.DeviceClass), old.(*resourceapi.DeviceClass))
}

func (classStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (classStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// GetResetFields: a DeviceClass has no status, nothing is reset.
func (classStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set { return nil }
