package allocation

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
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
	return nodeSelectorMatches(required, node)
}

func matchesAllocations(selectors []*corev1.NodeSelector, node *corev1.Node) bool {
	for _, selector := range selectors {
		// An allocation without node selector is usable everywhere.
		if selector != nil && !nodeSelectorMatches(selector, node) {
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

// nodeSelectorMatches: any term matches; within a term, all requirements.
// An empty term matches nothing, as in the scheduler.
func nodeSelectorMatches(selector *corev1.NodeSelector, node *corev1.Node) bool {
	for _, term := range selector.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	for _, req := range term.MatchExpressions {
		value, present := node.Labels[req.Key]
		if !requirementMatches(req, value, present) {
			return false
		}
	}
	for _, req := range term.MatchFields {
		if req.Key != "metadata.name" || !requirementMatches(req, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(req corev1.NodeSelectorRequirement, value string, present bool) bool {
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(req.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(req.Values, value)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !present || len(req.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(req.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if req.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}
