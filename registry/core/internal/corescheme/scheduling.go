package corescheme

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// scheduling.k8s.io/v1 (PriorityClass) and its internal twin.
var (
	SchedulingV1       = schedulingv1.SchemeGroupVersion
	SchedulingInternal = schema.GroupVersion{Group: schedulingv1.GroupName, Version: runtime.APIVersionInternal}
)

func addSchedulingTypes(scheme *runtime.Scheme) {
	scheme.AddKnownTypes(SchedulingV1, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{})
	scheme.AddKnownTypes(SchedulingInternal, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{})
	metav1.AddToGroupVersion(scheme, SchedulingV1)
	scheme.AddTypeDefaultingFunc(&schedulingv1.PriorityClass{}, func(obj interface{}) { SetDefaultsPriorityClass(obj.(*schedulingv1.PriorityClass)) })
	scheme.AddTypeDefaultingFunc(&schedulingv1.PriorityClassList{}, func(obj interface{}) {
		list := obj.(*schedulingv1.PriorityClassList)
		for i := range list.Items {
			SetDefaultsPriorityClass(&list.Items[i])
		}
	})
}

// SetDefaultsPriorityClass gives a class without a preemptionPolicy
// PreemptLowerPriority, as upstream's scheduling/v1 defaults do.
func SetDefaultsPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	}
}
