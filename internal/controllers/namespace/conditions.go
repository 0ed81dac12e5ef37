package namespace

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The conditions a terminating namespace carries, so that `kubectl describe
// namespace` says why it is still there.
var reportedConditions = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// conditionsFor describes a deletion round as namespace conditions.
func conditionsFor(report *deletionReport) map[corev1.NamespaceConditionType]corev1.NamespaceCondition {
	conditions := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{
		corev1.NamespaceDeletionDiscoveryFailure: {Status: corev1.ConditionFalse, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered"},
		corev1.NamespaceDeletionContentFailure:   {Status: corev1.ConditionFalse, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization"},
		corev1.NamespaceContentRemaining:         {Status: corev1.ConditionFalse, Reason: "ContentRemoved", Message: "All content successfully removed"},
		corev1.NamespaceFinalizersRemaining:      {Status: corev1.ConditionFalse, Reason: "ContentHasNoFinalizers", Message: "All content-preserving finalizers finished"},
	}
	if report.discoveryErr != nil {
		conditions[corev1.NamespaceDeletionDiscoveryFailure] = corev1.NamespaceCondition{Status: corev1.ConditionTrue, Reason: "DiscoveryFailed", Message: report.discoveryErr.Error()}
	}
	if len(report.deleteErrs) > 0 {
		var messages []string
		for _, err := range report.deleteErrs {
			messages = append(messages, err.Error())
		}
		sort.Strings(messages)
		conditions[corev1.NamespaceDeletionContentFailure] = corev1.NamespaceCondition{Status: corev1.ConditionTrue, Reason: "ContentDeletionFailed", Message: "Failed to delete all resource types: " + strings.Join(messages, "; ")}
	}
	if len(report.remaining) > 0 {
		conditions[corev1.NamespaceContentRemaining] = corev1.NamespaceCondition{Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain", Message: "Some resources are remaining: " + countsMessage(report.remaining)}
	}
	if len(report.finalizers) > 0 {
		conditions[corev1.NamespaceFinalizersRemaining] = corev1.NamespaceCondition{Status: corev1.ConditionTrue, Reason: "SomeFinalizersRemain", Message: "Some content in the namespace has finalizers remaining: " + countsMessage(report.finalizers)}
	}
	return conditions
}

// countsMessage renders counts as "pods has 2 resource instances, ..." in
// a stable order.
func countsMessage(counts map[string]int) string {
	var parts []string
	for name, n := range counts {
		parts = append(parts, fmt.Sprintf("%s has %d resource instances", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// updateConditions writes the conditions of a deletion round into the
// namespace status when they differ from what is there.
func (c *Controller) updateConditions(ctx context.Context, ns *corev1.Namespace, report *deletionReport) error {
	wanted := conditionsFor(report)
	updated := ns.DeepCopy()
	changed := false
	now := metav1.NewTime(c.now())
	for _, conditionType := range reportedConditions {
		want := wanted[conditionType]
		want.Type = conditionType
		i := -1
		for j := range updated.Status.Conditions {
			if updated.Status.Conditions[j].Type == conditionType {
				i = j
			}
		}
		switch {
		case i < 0:
			want.LastTransitionTime = now
			updated.Status.Conditions = append(updated.Status.Conditions, want)
			changed = true
		case updated.Status.Conditions[i].Status != want.Status || updated.Status.Conditions[i].Reason != want.Reason || updated.Status.Conditions[i].Message != want.Message:
			want.LastTransitionTime = updated.Status.Conditions[i].LastTransitionTime
			if updated.Status.Conditions[i].Status != want.Status {
				want.LastTransitionTime = now
			}
			updated.Status.Conditions[i] = want
			changed = true
		}
	}
	if !changed {
		return nil
	}
	_, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
