// Package corescheme registers the k8s.io/api structs that core-lite serves.
//
// Kubernetes' own internal core types are not available outside
// k8s.io/kubernetes, so the external Go structs are registered twice: under
// their real version and under runtime.APIVersionInternal of the same group.
// The REST handlers decode into the internal version; with the same Go type on
// both sides the scheme only relabels the object.
package corescheme

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Scheme holds only the core-lite types. Strategies use it as their
// ObjectTyper; the server registers the same types in its own scheme through
// AddToScheme.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(AddToScheme(Scheme))
}

// Group versions served by core-lite, and their internal twins.
var (
	CoreV1               = corev1.SchemeGroupVersion
	CoreInternal         = schema.GroupVersion{Group: corev1.GroupName, Version: runtime.APIVersionInternal}
	CoordinationV1       = coordinationv1.SchemeGroupVersion
	CoordinationInternal = schema.GroupVersion{Group: coordinationv1.GroupName, Version: runtime.APIVersionInternal}
	PolicyV1             = policyv1.SchemeGroupVersion
	PolicyInternal       = schema.GroupVersion{Group: policyv1.GroupName, Version: runtime.APIVersionInternal}
)

// AddToScheme registers the core-lite types under their real and internal
// versions, their defaulting funcs and their field label conversions.
func AddToScheme(scheme *runtime.Scheme) error {
	coreTypes := func() []runtime.Object {
		return []runtime.Object{
			&corev1.Pod{}, &corev1.PodList{},
			&corev1.Namespace{}, &corev1.NamespaceList{},
			&corev1.Node{}, &corev1.NodeList{},
			&corev1.Event{}, &corev1.EventList{},
			&corev1.Binding{},
		}
	}
	scheme.AddKnownTypes(CoreV1, coreTypes()...)
	scheme.AddKnownTypes(CoreInternal, coreTypes()...)
	metav1.AddToGroupVersion(scheme, CoreV1)

	scheme.AddKnownTypes(PolicyV1, &policyv1.Eviction{})
	scheme.AddKnownTypes(PolicyInternal, &policyv1.Eviction{})
	metav1.AddToGroupVersion(scheme, PolicyV1)

	scheme.AddKnownTypes(CoordinationV1, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	scheme.AddKnownTypes(CoordinationInternal, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	metav1.AddToGroupVersion(scheme, CoordinationV1)

	if err := addSchedulingTypes(scheme); err != nil {
		return err
	}

	if err := addAuthToScheme(scheme); err != nil {
		return err
	}
	if err := addDefaultingFuncs(scheme); err != nil {
		return err
	}
	return addFieldLabelConversionFuncs(scheme)
}
