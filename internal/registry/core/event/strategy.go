// Package event serves core/v1 Events.
package event

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

type eventStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for events.
var Strategy = eventStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (eventStrategy) NamespaceScoped() bool { return true }

func (eventStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {}

func (eventStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}

func (eventStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	event := obj.(*corev1.Event)
	allErrs := apimachineryvalidation.ValidateObjectMeta(&event.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validateEvent(event)...)
}

func (eventStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	event, oldEvent := obj.(*corev1.Event), old.(*corev1.Event)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&event.ObjectMeta, &oldEvent.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateEvent(event)...)
}

// Kinds whose objects have no namespace; their events may live in any
// namespace.
var clusterScopedKinds = map[string]bool{"Node": true, "Namespace": true, "DeviceClass": true, "ResourceSlice": true, "DeviceTaintRule": true}

func validateEvent(event *corev1.Event) field.ErrorList {
	var allErrs field.ErrorList
	involved := field.NewPath("involvedObject")
	if event.InvolvedObject.Namespace != "" && event.InvolvedObject.Namespace != event.Namespace && !clusterScopedKinds[event.InvolvedObject.Kind] {
		allErrs = append(allErrs, field.Invalid(involved.Child("namespace"), event.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	switch event.Type {
	case "", corev1.EventTypeNormal, corev1.EventTypeWarning:
	default:
		allErrs = append(allErrs, field.NotSupported(field.NewPath("type"), event.Type, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
	}
	if event.ReportingController != "" {
		for _, msg := range validation.IsQualifiedName(event.ReportingController) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("reportingComponent"), event.ReportingController, msg))
		}
	}
	if event.Count < 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("count"), event.Count, "must be greater than or equal to 0"))
	}
	return allErrs
}

func (eventStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (eventStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (eventStrategy) Canonicalize(obj runtime.Object) {}

func (eventStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return true }

func (eventStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// GetAttrs returns the labels and selectable fields of an event.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	event, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an event: %T", obj)
	}
	return labels.Set(event.Labels), ToSelectableFields(event), nil
}

// ToSelectableFields returns the fields of an event that field selectors can
// use (see corescheme.EventFieldLabels).
func ToSelectableFields(event *corev1.Event) fields.Set {
	eventFields := fields.Set{
		"involvedObject.kind":            event.InvolvedObject.Kind,
		"involvedObject.namespace":       event.InvolvedObject.Namespace,
		"involvedObject.name":            event.InvolvedObject.Name,
		"involvedObject.uid":             string(event.InvolvedObject.UID),
		"involvedObject.apiVersion":      event.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": event.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       event.InvolvedObject.FieldPath,
		"reason":                         event.Reason,
		"reportingComponent":             event.ReportingController,
		"source":                         event.Source.Component,
		"type":                           event.Type,
	}
	return generic.MergeFieldsSets(generic.ObjectMetaFieldsSet(&event.ObjectMeta, true), eventFields)
}

// Matcher selects events by labels and fields.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
