package allocation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
)

// nodeFilter is why nodes were not candidates for a pod, for messages.
type nodeFilter struct {
	notReady, unschedulable, selector, taint, allocation int
	// candidates passed all checks.
	candidates int
}

func (f nodeFilter) String() string {
	return fmt.Sprintf("%d not ready, %d unschedulable, %d not matching the pod's node selector or affinity, %d with untolerated taints, %d not matching allocated claims",
		f.notReady, f.unschedulable, f.selector, f.taint, f.allocation)
}

// candidateNode checks everything about a node except devices: it is
// Ready, schedulable, matches the pod's nodeSelector and required node
// affinity, its NoSchedule/NoExecute taints are tolerated and it lies
// within the node selectors of the pod's claims that are allocated
// already.
func candidateNode(logger klog.Logger, pod *corev1.Pod, node *corev1.Node, allocated []*corev1.NodeSelector, filter *nodeFilter) bool {
	switch {
	case !nodeReady(node):
		filter.notReady++
	case node.Spec.Unschedulable:
		filter.unschedulable++
	case !podMatchesNode(pod, node):
		filter.selector++
	case !taintsTolerated(logger, pod.Spec.Tolerations, node.Spec.Taints):
		filter.taint++
	case !matchesAllocations(allocated, node):
		filter.allocation++
	default:
		return true
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, condition := range node.Status.Conditions {
		if condition.Type == corev1.NodeReady {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podMatchesNode: spec.nodeSelector and required node affinity, as the
// scheduler reads them.
func podMatchesNode(pod *corev1.Pod, node *corev1.Node) bool {
	for key, value := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[key]; !ok || got != value {
			return false
		}
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return true
	}
	required := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil {
		return true
	}
	return allocator.NodeSelectorMatches(required, node)
}

func matchesAllocations(selectors []*corev1.NodeSelector, node *corev1.Node) bool {
	for _, selector := range selectors {
		// An allocation without node selector is usable everywhere.
		if selector != nil && !allocator.NodeSelectorMatches(selector, node) {
			return false
		}
	}
	return true
}

func taintsTolerated(logger klog.Logger, tolerations []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(logger, taint, false) }) {
			return false
		}
	}
	return true
}
