// Package resourceclaimtemplate holds the behaviour (strategy) and the
// storage of ResourceClaimTemplates: namespaced blueprints from which a
// claim is generated for each pod that names the template.
package resourceclaimtemplate

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/validation"
	"github.com/draplane/draplane/internal/registry/resourceclaim"
)

// templateStrategy implements create, update and delete behaviour.
type templateStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	adminAccess resourceclaim.AdminAccess
}

// NewStrategy returns the strategy for ResourceClaimTemplates; typer must
// know the internal and external types of resource.draplane.dev. Admin
// access is checked as for claims: a template is a claim in waiting.
func NewStrategy(typer runtime.ObjectTyper, adminAccess resourceclaim.AdminAccess) templateStrategy {
	return templateStrategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, adminAccess: adminAccess}
}

func (templateStrategy) NamespaceScoped() bool { return true }

// PrepareForCreate starts the generation at 1 and drops the fields of
// feature gates that are off.
func (templateStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	template := obj.(*resourceapi.ResourceClaimTemplate)
	template.Generation = 1
	resourceclaim.DropDisabledSpecFields(&template.Spec.Spec, nil)
}

func (s templateStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	template := obj.(*resourceapi.ResourceClaimTemplate)
	errs := validation.ValidateResourceClaimTemplate(template)
	return append(errs, s.adminAccess.ValidateSpec(ctx, template.Namespace, &template.Spec.Spec, field.NewPath("spec", "spec"))...)
}

func (templateStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return nil
}

func (templateStrategy) Canonicalize(obj runtime.Object) {}

func (templateStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// PrepareForUpdate drops the fields of feature gates that are off unless
// the stored template uses them.
func (templateStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	template := obj.(*resourceapi.ResourceClaimTemplate)
	resourceclaim.DropDisabledSpecFields(&template.Spec.Spec, &old.(*resourceapi.ResourceClaimTemplate).Spec.Spec)
}

// ValidateUpdate refuses spec changes: claims already generated from the
// template would silently disagree with it.
func (s templateStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	template := obj.(*resourceapi.ResourceClaimTemplate)
	oldTemplate := old.(*resourceapi.ResourceClaimTemplate)
	errs := validation.ValidateResourceClaimTemplateUpdate(template, oldTemplate)
	if len(validation.ValidateQuantityMagnitudes(template, nil)) > 0 {
		return errs // comparing the specs would run for minutes
	}
	errs = append(errs, s.adminAccess.ValidateSpecUpdate(ctx, template.Namespace, &template.Spec.Spec, &oldTemplate.Spec.Spec, field.NewPath("spec", "spec"))...)
	if apiequality.Semantic.DeepEqual(template.Spec, oldTemplate.Spec) {
		return errs
	}
	specPath := field.NewPath("spec")
	for _, err := range errs {
		if err.Field == specPath.String() {
			return errs
		}
	}
	return append(errs, field.Invalid(specPath, "<spec>", "field is immutable"))
}

func (templateStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (templateStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// GetResetFields: a template has no status, nothing is reset.
func (templateStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set { return nil }
