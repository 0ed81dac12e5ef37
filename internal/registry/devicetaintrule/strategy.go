// Package devicetaintrule holds the behaviour (strategy) and the storage
// of DeviceTaintRules: cluster-scoped rules that taint every device their
// selector matches. Admins own the spec; the eviction controller reports
// progress in the status.
package devicetaintrule

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
	"github.com/draplane/draplane/apis/resource/validation"
)

// ruleStrategy implements create, update and delete of the main resource.
type ruleStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	// now returns the time stamped on taints; a test can fix it.
	now func() metav1.Time
}

// NewStrategy returns the strategy for DeviceTaintRules; typer must know
// the internal and external types of resource.draplane.dev.
func NewStrategy(typer runtime.ObjectTyper) ruleStrategy {
	return ruleStrategy{
		ObjectTyper:   typer,
		NameGenerator: names.SimpleNameGenerator,
		now:           func() metav1.Time { return metav1.Now().Rfc3339Copy() },
	}
}

func (ruleStrategy) NamespaceScoped() bool { return false }

// GetResetFields: writes to the main resource never change the status.
func (ruleStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("status"))
}

// PrepareForCreate clears the status, starts the generation at 1 and
// stamps the taint with the time it was added if the client did not.
func (s ruleStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	rule := obj.(*resourceapi.DeviceTaintRule)
	rule.Status = resourceapi.DeviceTaintRuleStatus{}
	rule.Generation = 1
	if rule.Spec.Taint.TimeAdded == nil {
		now := s.now()
		rule.Spec.Taint.TimeAdded = &now
	}
}

func (ruleStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateDeviceTaintRule(obj.(*resourceapi.DeviceTaintRule))
}

func (ruleStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (ruleStrategy) Canonicalize(obj runtime.Object) {}

func (ruleStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// PrepareForUpdate keeps the stored status and bumps the generation on a
// spec change. A new effect is a new taint as far as tolerationSeconds go,
// so timeAdded is re-stamped; otherwise a missing timeAdded keeps the
// stored one.
func (s ruleStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	rule := obj.(*resourceapi.DeviceTaintRule)
	oldRule := old.(*resourceapi.DeviceTaintRule)
	rule.Status = oldRule.Status
	switch {
	case rule.Spec.Taint.Effect != oldRule.Spec.Taint.Effect:
		now := s.now()
		rule.Spec.Taint.TimeAdded = &now
	case rule.Spec.Taint.TimeAdded == nil:
		rule.Spec.Taint.TimeAdded = oldRule.Spec.Taint.TimeAdded.DeepCopy()
	}
	if !apiequality.Semantic.DeepEqual(rule.Spec, oldRule.Spec) {
		rule.Generation = oldRule.Generation + 1
	}
}

func (ruleStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateDeviceTaintRuleUpdate(obj.(*resourceapi.DeviceTaintRule), old.(*resourceapi.DeviceTaintRule))
}

func (ruleStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (ruleStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// statusStrategy implements updates through the status subresource.
type statusStrategy struct {
	ruleStrategy
}

// NewStatusStrategy returns the strategy of the status subresource.
func NewStatusStrategy(typer runtime.ObjectTyper) statusStrategy {
	return statusStrategy{NewStrategy(typer)}
}

// GetResetFields: status writes never change the spec or metadata.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
}

// PrepareForUpdate keeps the stored spec and metadata.
func (statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	rule := obj.(*resourceapi.DeviceTaintRule)
	oldRule := old.(*resourceapi.DeviceTaintRule)
	rule.Spec = oldRule.Spec
	metav1.ResetObjectMetaForStatus(rule, oldRule)
}

func (statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateDeviceTaintRuleStatusUpdate(obj.(*resourceapi.DeviceTaintRule), old.(*resourceapi.DeviceTaintRule))
}

func (statusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// resetFields returns the same field set for every served version.
func resetFields(paths ...fieldpath.Path) map[fieldpath.APIVersion]*fieldpath.Set {
	set := fieldpath.NewSet(paths...)
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(resourcev1.SchemeGroupVersion.String()):      set,
		fieldpath.APIVersion(resourcev1beta1.SchemeGroupVersion.String()): set,
	}
}
