// Package node serves core/v1 Nodes and their status subresource.
package node

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

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

type nodeStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for nodes.
var Strategy = nodeStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (nodeStrategy) NamespaceScoped() bool { return false }

// GetResetFields returns the fields a spec update leaves alone.
func (nodeStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate keeps the status: a node agent registers its node with a
// status in one request.
func (nodeStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {}

func (nodeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
	node.Status = oldNode.Status
}

func (nodeStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	node := obj.(*corev1.Node)
	allErrs := apimachineryvalidation.ValidateObjectMeta(&node.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validateNodeSpec(&node.Spec, field.NewPath("spec"))...)
}

func (nodeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&node.ObjectMeta, &oldNode.ObjectMeta, field.NewPath("metadata"))
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, validateNodeSpec(&node.Spec, specPath)...)
	// Once assigned, pod CIDRs and the provider ID stay.
	if len(oldNode.Spec.PodCIDRs) > 0 && !apiequality.Semantic.DeepEqual(node.Spec.PodCIDRs, oldNode.Spec.PodCIDRs) {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	if oldNode.Spec.ProviderID != "" && node.Spec.ProviderID != oldNode.Spec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	return allErrs
}

var taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

func validateNodeSpec(spec *corev1.NodeSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, cidr := range spec.PodCIDRs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("podCIDRs").Index(i), cidr, "must be a valid CIDR"))
		}
	}
	if len(spec.PodCIDRs) > 0 && spec.PodCIDR != spec.PodCIDRs[0] {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("podCIDR"), spec.PodCIDR, "must match the first entry of podCIDRs"))
	}
	seen := map[corev1.Taint]bool{}
	for i, taint := range spec.Taints {
		taintPath := fldPath.Child("taints").Index(i)
		for _, msg := range validation.IsQualifiedName(taint.Key) {
			allErrs = append(allErrs, field.Invalid(taintPath.Child("key"), taint.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(taint.Value) {
			allErrs = append(allErrs, field.Invalid(taintPath.Child("value"), taint.Value, msg))
		}
		switch taint.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		case "":
			allErrs = append(allErrs, field.Required(taintPath.Child("effect"), ""))
		default:
			allErrs = append(allErrs, field.NotSupported(taintPath.Child("effect"), taint.Effect, taintEffects))
		}
		id := corev1.Taint{Key: taint.Key, Effect: taint.Effect}
		if seen[id] {
			allErrs = append(allErrs, field.Duplicate(taintPath, fmt.Sprintf("%s:%s", taint.Key, taint.Effect)))
		}
		seen[id] = true
	}
	return allErrs
}

func (nodeStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (nodeStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (nodeStrategy) Canonicalize(obj runtime.Object) {}

func (nodeStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func (nodeStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

type nodeStatusStrategy struct {
	nodeStrategy
}

// StatusStrategy is the update strategy of the status subresource.
var StatusStrategy = nodeStatusStrategy{Strategy}

// GetResetFields returns the fields a status update leaves alone.
func (nodeStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
	}
}

func (nodeStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
	node.Spec = oldNode.Spec
}

func (nodeStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
	return apimachineryvalidation.ValidateObjectMetaUpdate(&node.ObjectMeta, &oldNode.ObjectMeta, field.NewPath("metadata"))
}

// GetAttrs returns the labels and selectable fields of a node.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil, fmt.Errorf("not a node: %T", obj)
	}
	return labels.Set(node.Labels), ToSelectableFields(node), nil
}

// ToSelectableFields returns the fields of a node that field selectors can
// use (see corescheme.NodeFieldLabels).
func ToSelectableFields(node *corev1.Node) fields.Set {
	return generic.MergeFieldsSets(generic.ObjectMetaFieldsSet(&node.ObjectMeta, false), fields.Set{
		"spec.unschedulable": strconv.FormatBool(node.Spec.Unschedulable),
	})
}

// Matcher selects nodes by labels and fields.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
