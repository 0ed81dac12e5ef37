package corescheme

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// scheduling.k8s.io/v1 (PriorityClass), v1beta1 (PodGroup) and their
// internal twin, which holds both kinds.
var (
	SchedulingV1       = schedulingv1.SchemeGroupVersion
	SchedulingV1beta1  = schedulingv1beta1.SchemeGroupVersion
	SchedulingInternal = schema.GroupVersion{Group: schedulingv1.GroupName, Version: runtime.APIVersionInternal}
)

func addSchedulingTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchedulingV1, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{})
	scheme.AddKnownTypes(SchedulingV1beta1, &schedulingv1beta1.PodGroup{}, &schedulingv1beta1.PodGroupList{})
	scheme.AddKnownTypes(SchedulingInternal, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{}, &schedulingv1beta1.PodGroup{}, &schedulingv1beta1.PodGroupList{})
	metav1.AddToGroupVersion(scheme, SchedulingV1)
	metav1.AddToGroupVersion(scheme, SchedulingV1beta1)
	// v1 is the group's preferred version, as upstream's.
	if err := scheme.SetVersionPriority(SchedulingV1, SchedulingV1beta1); err != nil {
		return err
	}
	scheme.AddTypeDefaultingFunc(&schedulingv1.PriorityClass{}, func(obj interface{}) { SetDefaultsPriorityClass(obj.(*schedulingv1.PriorityClass)) })
	scheme.AddTypeDefaultingFunc(&schedulingv1.PriorityClassList{}, func(obj interface{}) {
		list := obj.(*schedulingv1.PriorityClassList)
		for i := range list.Items {
			SetDefaultsPriorityClass(&list.Items[i])
		}
	})
	return nil
}

// SetDefaultsPriorityClass gives a class without a preemptionPolicy
// PreemptLowerPriority, as upstream's scheduling/v1 defaults do.
func SetDefaultsPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
}
