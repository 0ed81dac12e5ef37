package priorityclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
)

// Admission is upstream's Priority admission for new pods and PodGroups: a pod's
// priorityClassName (or, when it names none, the global default class)
// gives spec.priority and spec.preemptionPolicy, and a pod that sets
// either to something else is refused. Without a default class a pod gets
// priority 0 and PreemptLowerPriority.
//
// It handles creates only. On updates, the pod strategy keeps the
// priority a request leaves out (as upstream's plugin does on update), and
// the PriorityClass storage refuses a second global default (as its
// validation phase does): an admission plugin that mutates on update would
// make the API handlers decode the managedFields of every update again.
type Admission struct {
	*admission.Handler
	lister schedulinglisters.PriorityClassLister
}

var _ admission.MutationInterface = &Admission{}

// NewAdmission returns the plugin on the PriorityClass informer; it
// answers once the informer has synced.
func NewAdmission(informer schedulinginformers.PriorityClassInformer) *Admission {
	a := &Admission{Handler: admission.NewHandler(admission.Create), lister: informer.Lister()}
	a.SetReadyFunc(informer.Informer().HasSynced)
	return a
}

var (
	podResource      = corev1.Resource("pods")
	podGroupResource = schedulingv1beta1.Resource("podgroups")
)

// Admit resolves the priority of a new pod or PodGroup.
func (p *Admission) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if a.GetOperation() != admission.Create || a.GetSubresource() != "" {
		return nil
	}
	if gr := a.GetResource().GroupResource(); gr != podResource && gr != podGroupResource {
		return nil
	}
	// Before the informer has synced, a known class would look unknown
	// and the global default absent.
	if !p.WaitForReady() {
		return admission.NewForbidden(a, fmt.Errorf("not yet ready to handle request"))
	}
	switch a.GetResource().GroupResource() {
	case podResource:
		pod, ok := a.GetObject().(*corev1.Pod)
		if !ok {
			return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
		}
		return p.resolve(a, "pod", &pod.Spec.PriorityClassName, &pod.Spec.Priority, &pod.Spec.PreemptionPolicy)
	default:
		group, ok := a.GetObject().(*schedulingv1beta1.PodGroup)
		if !ok {
			return apierrors.NewBadRequest("resource was marked with kind PodGroup but was unable to be converted")
		}
		return p.admitPodGroup(a, group)
	}
}

// admitPodGroup resolves a new PodGroup's priority as a pod's, as
// upstream does for PodGroups: spec.priorityClassName (or the global
// default class, whose name it then gets) gives spec.priority, an unknown
// class or a spec.priority that disagrees is refused. spec.preemptionPolicy
// is resolved only with the PodGroupPreemptionPolicy gate, which is off
// (the PodGroup validation forbids the field): the gang falls back to its
// pods' policy.
func (p *Admission) admitPodGroup(a admission.Attributes, group *schedulingv1beta1.PodGroup) error {
	var unresolved *corev1.PreemptionPolicy
	return p.resolve(a, "pod group", &group.Spec.PriorityClassName, &group.Spec.Priority, &unresolved)
}

// resolve sets className (when empty, to the global default's), priority
// and policy from the PriorityClass; what names the object in the errors.
// Without a default class the policy is PreemptLowerPriority; a class
// without a policy leaves it as it is.
func (p *Admission) resolve(a admission.Attributes, what string, className *string, priorityField **int32, policyField **corev1.PreemptionPolicy) error {
	var priority int32
	var preemptionPolicy *corev1.PreemptionPolicy
	if *className == "" {
		pc, err := p.defaultPriorityClass()
		if err != nil {
			return fmt.Errorf("failed to get default priority class: %v", err)
		}
		if pc != nil {
			*className, priority, preemptionPolicy = pc.Name, pc.Value, pc.PreemptionPolicy
		} else {
			priority = DefaultPriorityWhenNoDefaultClassExists
			preemptionPolicy = new(corev1.PreemptLowerPriority)
		}
	} else {
		pc, err := p.lister.Get(*className)
		if apierrors.IsNotFound(err) {
			return admission.NewForbidden(a, fmt.Errorf("no PriorityClass with name %v was found", *className))
		}
		if err != nil {
			return fmt.Errorf("failed to get PriorityClass with name %s: %v", *className, err)
		}
		priority, preemptionPolicy = pc.Value, pc.PreemptionPolicy
	}
	if *priorityField != nil && **priorityField != priority {
		return admission.NewForbidden(a, fmt.Errorf("the integer value of priority (%d) must not be provided in %s spec; priority admission controller computed %d from the given PriorityClass name", **priorityField, what, priority))
	}
	*priorityField = &priority
	if preemptionPolicy != nil {
		if *policyField != nil && **policyField != *preemptionPolicy {
			return admission.NewForbidden(a, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in %s spec; priority admission controller computed %s from the given PriorityClass name", **policyField, what, *preemptionPolicy))
		}
		policy := *preemptionPolicy
		*policyField = &policy
	}
	return nil
}

// defaultPriorityClass is the class marked globalDefault; should a race
// have left several, the one of the lowest value, as upstream.
func (p *Admission) defaultPriorityClass() (*schedulingv1.PriorityClass, error) {
	list, err := p.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return lowestDefault(list), nil
}

func lowestDefault(classes []*schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	var found *schedulingv1.PriorityClass
	for _, pc := range classes {
		if pc.GlobalDefault && (found == nil || found.Value > pc.Value) {
			found = pc
		}
	}
	return found
}
