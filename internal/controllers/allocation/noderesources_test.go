package allocation

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestNodeRequests: what a node lacks, with the pods bound to it counted
// once however often the informer reports them, done and deleted pods
// not counted, a pod this controller bound counted before the informer
// shows it, and gang members on one node checked together.
func TestNodeRequests(t *testing.T) {
	node := makeNode("node-a", withAllocatable("4", "8Gi", 3))
	pod := func(name, cpu string, options ...podOption) *corev1.Pod {
		return makePod(name, append([]podOption{withRequests(cpu, "1Gi")}, options...)...)
	}
	tests := map[string]struct {
		events func(n *nodeRequests)
		// requests are the cpu requests of the pods to place.
		requests []string
		want     []string
	}{
		"empty node":          {requests: []string{"4"}},
		"more cpu than there": {requests: []string{"5"}, want: []string{"cpu"}},
		"a bound pod counts once, however often seen": {
			events: func(n *nodeRequests) {
				p := pod("a", "3", withNodeName("node-a"))
				n.observe(p)
				n.observe(p)
			},
			requests: []string{"1"},
		},
		"a bound pod leaves too little": {
			events:   func(n *nodeRequests) { n.observe(pod("a", "3", withNodeName("node-a"))) },
			requests: []string{"2"}, want: []string{"cpu"},
		},
		"a done pod counts for nothing": {
			events: func(n *nodeRequests) {
				n.observe(pod("a", "3", withNodeName("node-a")))
				done := pod("a", "3", withNodeName("node-a"))
				done.Status.Phase = corev1.PodFailed
				n.observe(done)
			},
			requests: []string{"4"},
		},
		"a deleted pod counts for nothing": {
			events: func(n *nodeRequests) {
				p := pod("a", "3", withNodeName("node-a"))
				n.observe(p)
				n.handler().OnDelete(p)
			},
			requests: []string{"4"},
		},
		"a pod of another node counts for nothing": {
			events:   func(n *nodeRequests) { n.observe(pod("a", "3", withNodeName("node-b"))) },
			requests: []string{"4"},
		},
		"a pod bound by this controller counts before the informer shows it": {
			events:   func(n *nodeRequests) { n.assume(pod("a", "3"), "node-a") },
			requests: []string{"2"}, want: []string{"cpu"},
		},
		"a pod resized (a new generation) counts its new requests": {
			events: func(n *nodeRequests) {
				p := pod("a", "3", withNodeName("node-a"))
				p.Generation = 1
				n.observe(p)
				n.observe(p)
				resized := pod("a", "1", withNodeName("node-a"))
				resized.Generation = 2
				n.observe(resized)
			},
			requests: []string{"3"},
		},
		"an unbound pod counts for nothing": {
			events:   func(n *nodeRequests) { n.observe(pod("a", "3")) },
			requests: []string{"4"},
		},
		"too many pods": {
			events: func(n *nodeRequests) {
				n.observe(pod("a", "0", withNodeName("node-a")))
				n.observe(pod("b", "0", withNodeName("node-a")))
			},
			requests: []string{"1", "1"}, want: []string{"pods"},
		},
		"two members together lack cpu, each alone fits": {
			requests: []string{"3", "2"}, want: []string{"cpu"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := newNodeRequests()
			if tc.events != nil {
				tc.events(n)
			}
			var requests []demand
			for _, cpu := range tc.requests {
				requests = append(requests, requestsOf(pod("new", cpu)))
			}
			if got := n.insufficient(node, requests...); !slices.Equal(got, tc.want) {
				t.Errorf("insufficient %v, want %v", got, tc.want)
			}
		})
	}

	n := newNodeRequests()
	placed := map[string][]*corev1.Pod{"node-a": {pod("m-0", "3"), pod("m-1", "2")}}
	if got := n.gangOverflow(placed, func(string) (*corev1.Node, error) { return node, nil }); got != "the 2 members placed on node node-a do not fit there together: insufficient cpu" {
		t.Errorf("gang overflow %q", got)
	}
}

// TestNodeRequestsScalar: extended resources of device plugins are
// counted against the node's allocatable, those that the pod's claim for
// extended resources covers are not (devices serve them), and the
// explanation names them as kube-scheduler does.
func TestNodeRequestsScalar(t *testing.T) {
	node := makeNode("node-a", withAllocatable("4", "8Gi", 110))
	node.Status.Allocatable["example.com/fpga"] = resource.MustParse("2")
	pod := func(name string, resources map[string]string, options ...podOption) *corev1.Pod {
		p := makePod(name, append([]podOption{withRequests("100m", "1Gi")}, options...)...)
		for resourceName, quantity := range resources {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(resourceName)] = resource.MustParse(quantity)
		}
		return p
	}
	fromDevices := func(pod *corev1.Pod) {
		pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "c",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: pod.Spec.Containers[0].Name, ResourceName: "example.com/gpu", RequestName: "r"}}}
	}
	tests := map[string]struct {
		bound []*corev1.Pod
		pod   *corev1.Pod
		want  []string
	}{
		"device plugin resource fits":     {pod: pod("new", map[string]string{"example.com/fpga": "2"})},
		"device plugin resource too much": {pod: pod("new", map[string]string{"example.com/fpga": "3"}), want: []string{"example.com/fpga"}},
		"a bound pod holds some": {
			bound: []*corev1.Pod{pod("a", map[string]string{"example.com/fpga": "1"}, withNodeName("node-a"))},
			pod:   pod("new", map[string]string{"example.com/fpga": "2"}), want: []string{"example.com/fpga"},
		},
		"not on the node at all": {
			pod: pod("new", map[string]string{"example.com/gpu": "1", "example.com/fpga": "3"}), want: []string{"example.com/fpga", "example.com/gpu"},
		},
		"served by devices": {pod: pod("new", map[string]string{"example.com/gpu": "1"}, fromDevices)},
		"hugepages": {
			pod: pod("new", map[string]string{"hugepages-2Mi": "4Mi"}), want: []string{"hugepages-2Mi"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := newNodeRequests()
			for _, p := range tc.bound {
				n.observe(p)
			}
			got := n.insufficient(node, requestsOf(tc.pod))
			if !slices.Equal(got, tc.want) {
				t.Errorf("insufficient %v, want %v", got, tc.want)
			}
			var filter nodeFilter
			n.filterByResources(tc.pod, []*corev1.Node{node}, &filter)
			for _, name := range tc.want {
				if want := "1 Insufficient " + name; name != "pods" && !strings.Contains(filter.describeInsufficient(), want) {
					t.Errorf("explanation %q does not say %q", filter.describeInsufficient(), want)
				}
			}
		})
	}
}

// TestNodeRequestsFreed: a pod counted on a node that is done or deleted
// announces its node (pods waiting for room are retried); an unbound or
// unknown pod announces nothing.
func TestNodeRequestsFreed(t *testing.T) {
	n := newNodeRequests()
	var freed []string
	n.freed = func(node string) { freed = append(freed, node) }
	bound := makePod("a", withRequests("1", "1Gi"), withNodeName("node-a"))
	n.observe(bound)
	n.observe(makePod("unbound", withRequests("1", "1Gi")))
	n.handler().OnDelete(makePod("unbound", withRequests("1", "1Gi")))
	done := bound.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	n.observe(done)
	n.handler().OnDelete(done)
	if !slices.Equal(freed, []string{"node-a"}) {
		t.Errorf("freed %v, want node-a once", freed)
	}
}
