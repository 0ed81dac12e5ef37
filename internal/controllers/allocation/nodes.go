package allocation

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

// nodeFilter is why nodes were not candidates for a pod, for messages.
type nodeFilter struct {
	notReady, unschedulable, selector, taint, allocation int
	// resources counts the nodes without room for the pod's requests
	// (Options.FitNodeResources); insufficient counts them per missing
	// resource.
	resources    int
	insufficient [len(insufficientNames)]int
	// insufficientScalar counts the nodes per missing scalar resource.
	insufficientScalar map[string]int
	// candidates passed all checks.
	candidates int
}

func (f nodeFilter) String() string {
	s := fmt.Sprintf("%d not ready, %d unschedulable, %d not matching the pod's node selector or affinity, %d with untolerated taints, %d not matching allocated claims",
		f.notReady, f.unschedulable, f.selector, f.taint, f.allocation)
	if f.resources > 0 {
		s += ", " + f.describeInsufficient()
	}
	return s
}

// candidateNode checks everything about a node except devices: it is
// Ready, schedulable, matches the pod's nodeSelector and required node
// affinity, its NoSchedule/NoExecute taints are tolerated and it lies
// within the node selectors of the pod's claims that are allocated
// already.
func candidateNode(logger klog.Logger, pod *corev1.Pod, n setNode, allocated []*corev1.NodeSelector, filter *nodeFilter) bool {
	switch {
	case !n.ready:
		filter.notReady++
	case n.node.Spec.Unschedulable:
		filter.unschedulable++
	case !podMatchesNode(pod, n.node):
		filter.selector++
	case n.hardTaints && !taintsTolerated(logger, pod.Spec.Tolerations, n.node.Spec.Taints):
		filter.taint++
	case !matchesAllocations(allocated, n.node):
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
	return nodeaffinity.NodeSelectorMatches(required, node)
}

func matchesAllocations(selectors []*corev1.NodeSelector, node *corev1.Node) bool {
	for _, selector := range selectors {
		// An allocation without node selector is usable everywhere.
		if selector != nil && !nodeaffinity.NodeSelectorMatches(selector, node) {
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

// nodeSet is the placement state's sorted view of the node informer,
// kept so that placing a pod does not list, check and sort every node
// again. It is rebuilt from the lister after a node event that can
// change which nodes are candidates (see onNode); other updates, such as
// heartbeats, change nothing it or the allocator reads of a node.
type nodeSet struct {
	// generation is the nodesGeneration it was built at.
	generation int64
	// nodes are all nodes, sorted by name.
	nodes []setNode
	// plain are the nodes that are Ready, schedulable and have no
	// NoSchedule or NoExecute taint, sorted by name: the candidates of
	// every pod without node selector, affinity or allocated claims.
	plain []*corev1.Node
	// notReady and unschedulable count the nodes candidateNode would
	// count so; tainted counts the Ready, schedulable nodes with
	// NoSchedule or NoExecute taints.
	notReady, unschedulable, tainted int
}

// setNode is one node with what candidateNode checks of it without a pod:
// whether it is Ready and has taints that keep pods off.
type setNode struct {
	node       *corev1.Node
	ready      bool
	hardTaints bool
}

func newNodeSet(generation int64, all []*corev1.Node) *nodeSet {
	set := &nodeSet{generation: generation, nodes: make([]setNode, 0, len(all))}
	for _, node := range all {
		n := setNode{node: node, ready: nodeReady(node), hardTaints: hasHardTaints(node.Spec.Taints)}
		set.nodes = append(set.nodes, n)
	}
	slices.SortFunc(set.nodes, func(a, b setNode) int { return strings.Compare(a.node.Name, b.node.Name) })
	for _, n := range set.nodes {
		switch {
		case !n.ready:
			set.notReady++
		case n.node.Spec.Unschedulable:
			set.unschedulable++
		case n.hardTaints:
			set.tainted++
		default:
			set.plain = append(set.plain, n.node)
		}
	}
	return set
}

// nodeSetLocked returns the current node set, rebuilding it when a node
// event made it stale. Callers hold the state's mutex.
func (s *placementState) nodeSetLocked() (*nodeSet, error) {
	generation := s.nodesGeneration.Load()
	if s.nodes != nil && s.nodes.generation == generation {
		return s.nodes, nil
	}
	all, err := s.nodeLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes from cache: %w", err)
	}
	s.nodes = newNodeSet(generation, all)
	return s.nodes, nil
}

// candidatesLocked lists the nodes the pod may go to, sorted by name, as
// candidateNode decides for each node: for a pod without node selector,
// required node affinity or allocated claims and a cluster without
// tainted nodes, that is the node set's plain list as it is. Callers hold
// the state's mutex and must not modify the list.
func (s *placementState) candidatesLocked(logger klog.Logger, pod *corev1.Pod, allocated []*corev1.NodeSelector) ([]*corev1.Node, nodeFilter, error) {
	set, err := s.nodeSetLocked()
	if err != nil {
		return nil, nodeFilter{}, err
	}
	if set.tainted == 0 && !podHasNodeConstraints(pod) && !slices.ContainsFunc(allocated, func(selector *corev1.NodeSelector) bool { return selector != nil }) {
		filter := nodeFilter{notReady: set.notReady, unschedulable: set.unschedulable, candidates: len(set.plain)}
		return set.plain[:len(set.plain):len(set.plain)], filter, nil
	}
	var filter nodeFilter
	nodes := make([]*corev1.Node, 0, len(set.plain))
	for _, n := range set.nodes {
		if candidateNode(logger, pod, n, allocated, &filter) {
			nodes = append(nodes, n.node)
		}
	}
	filter.candidates = len(nodes)
	return nodes, filter, nil
}

// podHasNodeConstraints: the pod has a node selector or required node
// affinity, which podMatchesNode checks.
func podHasNodeConstraints(pod *corev1.Pod) bool {
	if len(pod.Spec.NodeSelector) > 0 {
		return true
	}
	affinity := pod.Spec.Affinity
	return affinity != nil && affinity.NodeAffinity != nil && affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
}

// hasHardTaints: some taint keeps pods that do not tolerate it off the
// node (what taintsTolerated looks at).
func hasHardTaints(taints []corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	})
}
