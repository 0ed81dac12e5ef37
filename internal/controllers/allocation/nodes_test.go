package allocation

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// listCandidates is node selection as it was before the node set: list
// the informer, check every node, sort by name. candidatesLocked must
// give the same nodes and the same counts.
func listCandidates(t *testing.T, c *testController, logger klog.Logger, pod *corev1.Pod, allocated []*corev1.NodeSelector) ([]string, nodeFilter) {
	t.Helper()
	all, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var filter nodeFilter
	var names []string
	for _, node := range all {
		if candidateNode(logger, pod, setNode{node: node, ready: nodeReady(node), hardTaints: true}, allocated, &filter) {
			names = append(names, node.Name)
		}
	}
	filter.candidates = len(names)
	slices.Sort(names)
	return names, filter
}

func nodeNames(nodes []*corev1.Node) []string {
	names := make([]string, 0, len(nodes))
	for _, node := range nodes {
		names = append(names, node.Name)
	}
	return names
}

func TestCandidatesMatchListing(t *testing.T) {
	var plainNodes, mixedNodes []*corev1.Node
	for i := range 40 {
		plainNodes = append(plainNodes, makeNode(fmt.Sprintf("node-%02d", (i*7)%40)))
		var options []nodeOption
		switch i % 5 {
		case 1:
			options = append(options, notReady())
		case 2:
			options = append(options, withLabel("zone", "b"))
		case 3:
			options = append(options, withNodeTaint("dedicated"))
		}
		node := makeNode(fmt.Sprintf("node-%02d", (i*7)%40), options...)
		if i%10 == 4 {
			node.Spec.Unschedulable = true
		}
		if i%10 == 9 {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule})
		}
		mixedNodes = append(mixedNodes, node)
	}
	pods := map[string]*corev1.Pod{
		"plain":       makePod("pod", withGeneratedClaim("gpu")),
		"selector":    makePod("pod", withGeneratedClaim("gpu"), withNodeSelector("zone", "b")),
		"toleration":  makePod("pod", withGeneratedClaim("gpu"), withToleration("dedicated")),
		"no selector": makePod("pod", withGeneratedClaim("gpu"), withNodeSelector("zone", "none")),
	}
	allocated := map[string][]*corev1.NodeSelector{
		"none":       nil,
		"nil":        {nil},
		"one node":   {nodeNameSelector("node-12")},
		"other node": {nil, nodeNameSelector("node-13")},
	}
	for nodesName, nodes := range map[string][]*corev1.Node{"plain": plainNodes, "mixed": mixedNodes, "none": nil} {
		for podName, pod := range pods {
			for allocatedName, selectors := range allocated {
				t.Run(strings.Join([]string{nodesName, podName, allocatedName}, "/"), func(t *testing.T) {
					logger, _ := ktesting.NewTestContext(t)
					c := newTestController(t, logger, testCase{nodes: nodes})
					wantNames, wantFilter := listCandidates(t, c, logger, pod, selectors)
					c.state.mutex.Lock()
					defer c.state.mutex.Unlock()
					got, gotFilter, err := c.state.candidateNodes(logger, pod, selectors)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(nodeNames(got), wantNames) {
						t.Errorf("candidates %v, listing gives %v", nodeNames(got), wantNames)
					}
					if !reflect.DeepEqual(gotFilter, wantFilter) {
						t.Errorf("filter %+v, listing gives %+v", gotFilter, wantFilter)
					}
				})
			}
		}
	}
}

// TestNodeSetEvents: node events that can change the candidates rebuild
// the node set; heartbeats keep it.
func TestNodeSetEvents(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodeA, nodeB := makeNode("node-a"), makeNode("node-b")
	c := newTestController(t, logger, testCase{nodes: []*corev1.Node{nodeA, nodeB}})
	store := c.nodeStore
	pod := makePod("pod", withGeneratedClaim("gpu"))
	candidates := func() []string {
		t.Helper()
		c.state.mutex.Lock()
		defer c.state.mutex.Unlock()
		nodes, _, err := c.state.candidateNodes(logger, pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		return nodeNames(nodes)
	}
	expect := func(what string, want ...string) {
		t.Helper()
		if got := candidates(); !slices.Equal(got, want) {
			t.Errorf("%s: candidates %v, want %v", what, got, want)
		}
	}
	expect("initially", "node-a", "node-b")
	before := c.state.nodes

	heartbeat := nodeB.DeepCopy()
	heartbeat.ResourceVersion = "2"
	mustUpdate(t, store, heartbeat)
	c.onNode(logger, nodeB, heartbeat)
	expect("after a heartbeat", "node-a", "node-b")
	if c.state.nodes != before {
		t.Error("a heartbeat rebuilt the node set")
	}

	unready := makeNode("node-b", notReady())
	mustUpdate(t, store, unready)
	c.onNode(logger, heartbeat, unready)
	expect("after node-b became not ready", "node-a")

	nodeC := makeNode("node-0")
	mustAdd(t, store, nodeC)
	c.onNode(logger, nil, nodeC)
	expect("after node-0 was added", "node-0", "node-a")

	tainted := makeNode("node-a", withNodeTaint("dedicated"))
	mustUpdate(t, store, tainted)
	c.onNode(logger, nodeA, tainted)
	expect("after node-a was tainted", "node-0")

	if err := store.Delete(nodeC); err != nil {
		t.Fatal(err)
	}
	c.onNodeDeleted()
	expect("after node-0 was deleted")
}
