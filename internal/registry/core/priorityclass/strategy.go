// Package priorityclass serves scheduling.k8s.io/v1 PriorityClasses and
// holds the Priority admission, which gives every new pod the priority and
// preemptionPolicy of its class. Validation, the system classes and the
// admission follow upstream 1.37 (pkg/apis/scheduling/validation,
// pkg/registry/scheduling and plugin/pkg/admission/priority).
package priorityclass

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

const (
	// HighestUserDefinablePriority is the highest value a class outside
	// the system ones may have.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the value of system-cluster-critical.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemPriorityClassPrefix is reserved for the system classes.
	SystemPriorityClassPrefix = "system-"
	// SystemClusterCritical and SystemNodeCritical are the system classes.
	SystemClusterCritical = SystemPriorityClassPrefix + "cluster-critical"
	SystemNodeCritical    = SystemPriorityClassPrefix + "node-critical"
	// DefaultPriorityWhenNoDefaultClassExists is the priority of a pod
	// that names no class when no class is the global default.
	DefaultPriorityWhenNoDefaultClassExists = int32(0)
)

// SystemPriorityClasses are created at start and cannot be deleted.
func SystemPriorityClasses() []*schedulingv1.PriorityClass {
	preempt := func() *corev1.PreemptionPolicy { p := corev1.PreemptLowerPriority; return &p }
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:       metav1.ObjectMeta{Name: SystemNodeCritical},
			Value:            SystemCriticalPriority + 1000,
			Description:      "Used for system critical pods that must not be moved from their current node.",
			PreemptionPolicy: preempt(),
		},
		{
			ObjectMeta:       metav1.ObjectMeta{Name: SystemClusterCritical},
			Value:            SystemCriticalPriority,
			Description:      "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
			PreemptionPolicy: preempt(),
		},
	}
}

// isKnownSystemPriorityClass says whether the class is exactly one of the
// system classes, and otherwise why not.
func isKnownSystemPriorityClass(name string, value int32, globalDefault bool) error {
	for _, spc := range SystemPriorityClasses() {
		if spc.Name != name {
			continue
		}
		if spc.Value != value {
			return fmt.Errorf("value of %v PriorityClass must be %v", spc.Name, spc.Value)
		}
		if spc.GlobalDefault != globalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", spc.Name, spc.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", name)
}

type priorityClassStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for PriorityClasses.
var Strategy = priorityClassStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (priorityClassStrategy) NamespaceScoped() bool { return false }

func (priorityClassStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*schedulingv1.PriorityClass).Generation = 1
}

func (priorityClassStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}

func (priorityClassStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidatePriorityClass(obj.(*schedulingv1.PriorityClass))
}

func (priorityClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidatePriorityClassUpdate(obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass))
}

// ValidatePriorityClass checks a new class: its name, a value no higher
// than HighestUserDefinablePriority unless it is a system class (the only
// names allowed with the system- prefix), and its preemptionPolicy.
func ValidatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&pc.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if strings.HasPrefix(pc.Name, SystemPriorityClassPrefix) {
		if err := isKnownSystemPriorityClass(pc.Name, pc.Value, pc.GlobalDefault); err != nil {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("metadata", "name"), "priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"), fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if pc.PreemptionPolicy != nil {
		allErrs = append(allErrs, validatePreemptionPolicy(pc.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	}
	return allErrs
}

// ValidatePriorityClassUpdate keeps value and preemptionPolicy as they
// were; description and globalDefault may change.
func ValidatePriorityClassUpdate(pc, oldPc *schedulingv1.PriorityClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&pc.ObjectMeta, &oldPc.ObjectMeta, field.NewPath("metadata"))
	if pc.Value != oldPc.Value {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(pc.PreemptionPolicy, oldPc.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	return allErrs
}

func validatePreemptionPolicy(policy *corev1.PreemptionPolicy, fldPath *field.Path) field.ErrorList {
	switch *policy {
	case corev1.PreemptLowerPriority, corev1.PreemptNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, *policy, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever})}
	}
}

func (priorityClassStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return nil
}

func (priorityClassStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (priorityClassStrategy) Canonicalize(obj runtime.Object) {}

func (priorityClassStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func (priorityClassStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }
