// Package namespace serves core/v1 Namespaces with their status and finalize
// subresources. Deleting a namespace only marks it Terminating; the
// namespace controller empties it and then removes the "kubernetes"
// finalizer through the finalize subresource, which deletes it.
package namespace

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

type namespaceStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for namespaces.
var Strategy = namespaceStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (namespaceStrategy) NamespaceScoped() bool { return false }

// GetResetFields returns the fields a spec update leaves alone.
func (namespaceStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate makes a new namespace Active and gives it the
// "kubernetes" finalizer, so deleting it goes through the namespace
// controller.
func (namespaceStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	setNameLabel(ns)
}

// PrepareForUpdate keeps status and finalizers: only the status and finalize
// subresources change them.
func (namespaceStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Spec.Finalizers = oldNS.Spec.Finalizers
	ns.Status = oldNS.Status
	setNameLabel(ns)
}

// setNameLabel keeps the immutable label that lets selectors pick namespaces
// by name.
func setNameLabel(ns *corev1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

func (namespaceStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	allErrs := apimachineryvalidation.ValidateObjectMeta(&ns.ObjectMeta, false, apimachineryvalidation.ValidateNamespaceName, field.NewPath("metadata"))
	return append(allErrs, validateFinalizers(ns.Spec.Finalizers, field.NewPath("spec", "finalizers"))...)
}

func (namespaceStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&ns.ObjectMeta, &oldNS.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateFinalizers(ns.Spec.Finalizers, field.NewPath("spec", "finalizers"))...)
}

func validateFinalizers(finalizers []corev1.FinalizerName, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, finalizer := range finalizers {
		name := string(finalizer)
		for _, msg := range validation.IsQualifiedName(name) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), name, msg))
		}
		if finalizer != corev1.FinalizerKubernetes && !strings.Contains(name, "/") {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return allErrs
}

func (namespaceStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return nil
}

func (namespaceStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (namespaceStrategy) Canonicalize(obj runtime.Object) {}

func (namespaceStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func (namespaceStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

type namespaceStatusStrategy struct {
	namespaceStrategy
}

// StatusStrategy is the update strategy of the status subresource.
var StatusStrategy = namespaceStatusStrategy{Strategy}

// GetResetFields returns the fields a status update leaves alone.
func (namespaceStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
	}
}

func (namespaceStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Spec = oldNS.Spec
}

func (namespaceStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&ns.ObjectMeta, &oldNS.ObjectMeta, field.NewPath("metadata"))
	phasePath := field.NewPath("status", "phase")
	switch {
	case ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceActive:
		allErrs = append(allErrs, field.Invalid(phasePath, ns.Status.Phase, "may only be Active if metadata.deletionTimestamp is not set"))
	case !ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating:
		allErrs = append(allErrs, field.Invalid(phasePath, ns.Status.Phase, "may only be Terminating if metadata.deletionTimestamp is set"))
	}
	return allErrs
}

type namespaceFinalizeStrategy struct {
	namespaceStrategy
}

// FinalizeStrategy is the update strategy of the finalize subresource, which
// changes only spec.finalizers.
var FinalizeStrategy = namespaceFinalizeStrategy{Strategy}

// GetResetFields returns the fields a finalize update leaves alone.
func (namespaceFinalizeStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"), fieldpath.MakePathOrDie("metadata")),
	}
}

func (namespaceFinalizeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	finalizers := ns.Spec.Finalizers
	oldNS.DeepCopyInto(ns)
	ns.Spec.Finalizers = finalizers
}

func (namespaceFinalizeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&ns.ObjectMeta, &oldNS.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateFinalizers(ns.Spec.Finalizers, field.NewPath("spec", "finalizers"))...)
	if !apiequality.Semantic.DeepEqual(ns.Status, oldNS.Status) {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("status"), "may not be changed through the finalize subresource"))
	}
	return allErrs
}

// GetAttrs returns the labels and selectable fields of a namespace.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, nil, fmt.Errorf("not a namespace: %T", obj)
	}
	return labels.Set(ns.Labels), ToSelectableFields(ns), nil
}

// ToSelectableFields returns the fields of a namespace that field selectors
// can use (see corescheme.NamespaceFieldLabels).
func ToSelectableFields(ns *corev1.Namespace) fields.Set {
	return generic.MergeFieldsSets(generic.ObjectMetaFieldsSet(&ns.ObjectMeta, false), fields.Set{
		"status.phase": string(ns.Status.Phase),
	})
}

// Matcher selects namespaces by labels and fields.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
