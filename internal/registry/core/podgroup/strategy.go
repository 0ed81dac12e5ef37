// Package podgroup serves scheduling.k8s.io/v1beta1 PodGroups and their
// status subresource: the groups of pods that are placed together (gang
// scheduling), with upstream 1.37's fields, defaults and validation.
package podgroup

import (
	"context"
	"fmt"
	"strings"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

// highestUserDefinablePriority is upstream's bound of spec.priority.
const highestUserDefinablePriority = 1000000000

type podGroupStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for PodGroups.
var Strategy = podGroupStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (podGroupStrategy) NamespaceScoped() bool { return true }

// GetResetFields returns the fields a spec write leaves alone.
func (podGroupStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"scheduling.k8s.io/v1beta1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate drops the status (only the status subresource writes
// it) and the fields of gates that are off.
func (podGroupStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	group := obj.(*schedulingv1beta1.PodGroup)
	group.Status = schedulingv1beta1.PodGroupStatus{}
	group.Generation = 1
	dropDisabledFields(&group.Spec, nil)
}

// PrepareForUpdate keeps the status and bumps the generation when the spec
// changes.
func (podGroupStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	group, oldGroup := obj.(*schedulingv1beta1.PodGroup), old.(*schedulingv1beta1.PodGroup)
	group.Status = oldGroup.Status
	dropDisabledFields(&group.Spec, &oldGroup.Spec)
	if !apiequality.Semantic.DeepEqual(group.Spec, oldGroup.Spec) {
		group.Generation = oldGroup.Generation + 1
	}
}

// dropDisabledFields drops the fields whose gates are off, unless the old
// object uses them already.
func dropDisabledFields(spec, oldSpec *schedulingv1beta1.PodGroupSpec) {
	if !features.Enabled(features.DRAWorkloadResourceClaims) && (oldSpec == nil || len(oldSpec.ResourceClaims) == 0) {
		spec.ResourceClaims = nil
	}
	if !features.Enabled(features.TopologyAwareWorkloadScheduling) && (oldSpec == nil || oldSpec.SchedulingConstraints == nil) {
		spec.SchedulingConstraints = nil
	}
}

func (podGroupStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	group := obj.(*schedulingv1beta1.PodGroup)
	allErrs := apimachineryvalidation.ValidateObjectMeta(&group.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validateSpec(&group.Spec, field.NewPath("spec"))...)
}

func (podGroupStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	group, oldGroup := obj.(*schedulingv1beta1.PodGroup), old.(*schedulingv1beta1.PodGroup)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&group.ObjectMeta, &oldGroup.ObjectMeta, field.NewPath("metadata"))
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, validateSpec(&group.Spec, specPath)...)
	return append(allErrs, validateSpecUpdate(&group.Spec, &oldGroup.Spec, specPath)...)
}

// validateSpec checks what upstream's declarative tags of PodGroupSpec
// require.
func validateSpec(spec *schedulingv1beta1.PodGroupSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.ParentCompositePodGroupName != nil {
		// CompositePodGroups are not served.
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("parentCompositePodGroupName"), "disabled by feature-gate CompositePodGroup"))
	}
	if ref := spec.WorkloadRef; ref != nil {
		refPath := fldPath.Child("workloadRef")
		allErrs = append(allErrs, requiredName(ref.WorkloadName, refPath.Child("workloadName"), validation.IsDNS1123Subdomain)...)
		allErrs = append(allErrs, requiredName(ref.TemplateName, refPath.Child("templateName"), validation.IsDNS1123Label)...)
	}
	allErrs = append(allErrs, validateSchedulingPolicy(&spec.SchedulingPolicy, fldPath.Child("schedulingPolicy"))...)
	if constraints := spec.SchedulingConstraints; constraints != nil {
		topologyPath := fldPath.Child("schedulingConstraints", "topology")
		if len(constraints.Topology) > 1 {
			allErrs = append(allErrs, field.TooMany(topologyPath, len(constraints.Topology), 1))
		}
		for i, topology := range constraints.Topology {
			keyPath := topologyPath.Index(i).Child("key")
			if topology.Key == "" {
				allErrs = append(allErrs, field.Required(keyPath, ""))
				continue
			}
			for _, msg := range validation.IsQualifiedName(topology.Key) {
				allErrs = append(allErrs, field.Invalid(keyPath, topology.Key, msg))
			}
		}
	}
	allErrs = append(allErrs, validateResourceClaims(spec.ResourceClaims, fldPath.Child("resourceClaims"))...)
	if mode := spec.DisruptionMode; mode != nil {
		switch n := count(mode.Single != nil, mode.All != nil); {
		case n == 0:
			allErrs = append(allErrs, field.Invalid(fldPath.Child("disruptionMode"), "", "must specify one of: `single`, `all`"))
		case n > 1:
			allErrs = append(allErrs, field.Invalid(fldPath.Child("disruptionMode"), "{`single`, `all`}", "exactly one of `single`, `all` is required, but multiple fields are set"))
		}
	}
	if spec.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.PriorityClassName) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("priorityClassName"), spec.PriorityClassName, msg))
		}
	}
	if spec.Priority != nil && *spec.Priority > highestUserDefinablePriority {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("priority"), *spec.Priority, fmt.Sprintf("must be less than or equal to %d", highestUserDefinablePriority)))
	}
	if spec.PreemptionPolicy != nil {
		// PodGroupPreemptionPolicy is off: upstream forbids the field then.
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("preemptionPolicy"), "disabled by feature-gate PodGroupPreemptionPolicy"))
	}
	return allErrs
}

func validateSchedulingPolicy(policy *schedulingv1beta1.PodGroupSchedulingPolicy, fldPath *field.Path) field.ErrorList {
	switch n := count(policy.Basic != nil, policy.Gang != nil); {
	case n == 0:
		return field.ErrorList{field.Invalid(fldPath, "", "must specify one of: `basic`, `gang`")}
	case n > 1:
		return field.ErrorList{field.Invalid(fldPath, "{`basic`, `gang`}", "exactly one of `basic`, `gang` is required, but multiple fields are set")}
	}
	if policy.Gang == nil {
		return nil
	}
	minCountPath := fldPath.Child("gang", "minCount")
	switch {
	case policy.Gang.MinCount == 0:
		return field.ErrorList{field.Required(minCountPath, "")}
	case policy.Gang.MinCount < 0:
		return field.ErrorList{field.Invalid(minCountPath, policy.Gang.MinCount, "must be greater than or equal to 1")}
	}
	return nil
}

// validateResourceClaims checks spec.resourceClaims: at most
// MaxPodGroupResourceClaims entries with unique DNS-label names, each
// naming exactly one of a claim or a template.
func validateResourceClaims(claims []schedulingv1beta1.PodGroupResourceClaim, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(claims) > schedulingv1beta1.MaxPodGroupResourceClaims {
		allErrs = append(allErrs, field.TooMany(fldPath, len(claims), schedulingv1beta1.MaxPodGroupResourceClaims))
	}
	seen := sets.New[string]()
	for i, claim := range claims {
		idxPath := fldPath.Index(i)
		if seen.Has(claim.Name) {
			allErrs = append(allErrs, field.Duplicate(idxPath.Child("name"), claim.Name))
		} else {
			allErrs = append(allErrs, requiredName(claim.Name, idxPath.Child("name"), validation.IsDNS1123Label)...)
		}
		seen.Insert(claim.Name)
		switch {
		case claim.ResourceClaimName != nil && claim.ResourceClaimTemplateName != nil:
			allErrs = append(allErrs, field.Invalid(idxPath, "{`resourceClaimName`, `resourceClaimTemplateName`}", "exactly one of `resourceClaimName`, `resourceClaimTemplateName` is required, but multiple fields are set"))
		case claim.ResourceClaimName != nil:
			allErrs = append(allErrs, requiredName(*claim.ResourceClaimName, idxPath.Child("resourceClaimName"), validation.IsDNS1123Subdomain)...)
		case claim.ResourceClaimTemplateName != nil:
			allErrs = append(allErrs, requiredName(*claim.ResourceClaimTemplateName, idxPath.Child("resourceClaimTemplateName"), validation.IsDNS1123Subdomain)...)
		default:
			allErrs = append(allErrs, field.Invalid(idxPath, "", "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
	}
	return allErrs
}

// validateSpecUpdate: everything but gang.minCount is immutable; the
// policy cannot switch between basic and gang.
func validateSpecUpdate(spec, oldSpec *schedulingv1beta1.PodGroupSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	immutable := func(name string, value, oldValue any) {
		if !apiequality.Semantic.DeepEqual(value, oldValue) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child(name), value, "field is immutable"))
		}
	}
	immutable("parentCompositePodGroupName", spec.ParentCompositePodGroupName, oldSpec.ParentCompositePodGroupName)
	immutable("workloadRef", spec.WorkloadRef, oldSpec.WorkloadRef)
	immutable("schedulingConstraints", spec.SchedulingConstraints, oldSpec.SchedulingConstraints)
	immutable("resourceClaims", spec.ResourceClaims, oldSpec.ResourceClaims)
	immutable("disruptionMode", spec.DisruptionMode, oldSpec.DisruptionMode)
	immutable("priorityClassName", spec.PriorityClassName, oldSpec.PriorityClassName)
	immutable("priority", spec.Priority, oldSpec.Priority)
	immutable("preemptionPolicy", spec.PreemptionPolicy, oldSpec.PreemptionPolicy)
	policyPath := fldPath.Child("schedulingPolicy")
	if (spec.SchedulingPolicy.Basic == nil) != (oldSpec.SchedulingPolicy.Basic == nil) {
		allErrs = append(allErrs, field.Invalid(policyPath.Child("basic"), spec.SchedulingPolicy.Basic, "field is immutable"))
	}
	if (spec.SchedulingPolicy.Gang == nil) != (oldSpec.SchedulingPolicy.Gang == nil) {
		allErrs = append(allErrs, field.Forbidden(policyPath.Child("gang"), "may not be set or unset after creation"))
	}
	return allErrs
}

func requiredName(value string, fldPath *field.Path, check func(string) []string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range check(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func count(values ...bool) int {
	n := 0
	for _, v := range values {
		if v {
			n++
		}
	}
	return n
}

func (podGroupStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return nil
}

func (podGroupStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (podGroupStrategy) Canonicalize(obj runtime.Object) {}

func (podGroupStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func (podGroupStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

type podGroupStatusStrategy struct {
	podGroupStrategy
}

// StatusStrategy is the update strategy of the status subresource.
var StatusStrategy = podGroupStatusStrategy{Strategy}

// GetResetFields returns the fields a status write leaves alone.
func (podGroupStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"scheduling.k8s.io/v1beta1": fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
	}
}

func (podGroupStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	group, oldGroup := obj.(*schedulingv1beta1.PodGroup), old.(*schedulingv1beta1.PodGroup)
	group.Spec = oldGroup.Spec
	if !features.Enabled(features.DRAWorkloadResourceClaims) && len(oldGroup.Status.ResourceClaimStatuses) == 0 {
		group.Status.ResourceClaimStatuses = nil
	}
}

func (podGroupStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	group, oldGroup := obj.(*schedulingv1beta1.PodGroup), old.(*schedulingv1beta1.PodGroup)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&group.ObjectMeta, &oldGroup.ObjectMeta, field.NewPath("metadata"))
	statusPath := field.NewPath("status")
	allErrs = append(allErrs, metav1validation.ValidateConditions(group.Status.Conditions, statusPath.Child("conditions"))...)
	claimsPath := statusPath.Child("resourceClaimStatuses")
	if len(group.Status.ResourceClaimStatuses) > schedulingv1beta1.MaxPodGroupResourceClaims {
		allErrs = append(allErrs, field.TooMany(claimsPath, len(group.Status.ResourceClaimStatuses), schedulingv1beta1.MaxPodGroupResourceClaims))
	}
	seen := sets.New[string]()
	for i, status := range group.Status.ResourceClaimStatuses {
		idxPath := claimsPath.Index(i)
		if seen.Has(status.Name) {
			allErrs = append(allErrs, field.Duplicate(idxPath.Child("name"), status.Name))
		} else {
			allErrs = append(allErrs, requiredName(status.Name, idxPath.Child("name"), validation.IsDNS1123Label)...)
		}
		seen.Insert(status.Name)
		if status.ResourceClaimName != nil {
			allErrs = append(allErrs, requiredName(*status.ResourceClaimName, idxPath.Child("resourceClaimName"), validation.IsDNS1123Subdomain)...)
		}
	}
	return allErrs
}

// Policy names a group's scheduling policy for tables: "Gang" or "Basic".
func Policy(group *schedulingv1beta1.PodGroup) string {
	switch {
	case group.Spec.SchedulingPolicy.Gang != nil:
		return "Gang"
	case group.Spec.SchedulingPolicy.Basic != nil:
		return "Basic"
	}
	return "<none>"
}

// scheduledColumn is the status of PodGroupInitiallyScheduled, with its
// reason when it is not True.
func scheduledColumn(group *schedulingv1beta1.PodGroup) string {
	for _, c := range group.Status.Conditions {
		if c.Type != schedulingv1beta1.PodGroupInitiallyScheduled {
			continue
		}
		if c.Status == "True" || c.Reason == "" {
			return string(c.Status)
		}
		return strings.Join([]string{string(c.Status), c.Reason}, ",")
	}
	return "<unknown>"
}
