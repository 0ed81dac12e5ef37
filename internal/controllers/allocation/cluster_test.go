package allocation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/controllers/podmode"
)

func withSchedulerName(name string) podOption {
	return func(pod *corev1.Pod) { pod.Spec.SchedulerName = name }
}

// withRequests gives the pod's container cpu and memory requests.
func withRequests(cpu, memory string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		}
	}
}

// withAllocatable sets the node's allocatable cpu, memory and pods.
func withAllocatable(cpu, memory string, pods int) nodeOption {
	return func(node *corev1.Node) {
		node.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
			corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI),
		}
	}
}

// TestSyncPodCluster: in cluster mode the controller places only the pods
// that name its scheduler, keeps them off nodes whose allocatable cannot
// hold their requests beside every pod bound there, and protects the
// claims it allocates with upstream's finalizer.
func TestSyncPodCluster(t *testing.T) {
	mode := podmode.Cluster{SchedulerName: "draplane"}
	big := withAllocatable("4", "8Gi", 110)
	nodes := []*corev1.Node{makeNode("node-a", big), makeNode("node-b", big)}
	gpusOnA := []*resourcev1.ResourceSlice{makeSlice("node-a", 2, "a100")}
	gpusOnBoth := []*resourcev1.ResourceSlice{makeSlice("node-a", 2, "a100"), makeSlice("node-b", 2, "a100")}
	ours := makePod("pod-1", withGeneratedClaim("gpu"), withSchedulerName("draplane"), withRequests("1", "1Gi"))
	theirs := makePod("pod-1", withGeneratedClaim("gpu"), withSchedulerName("default-scheduler"))
	theirsBound := makePod("pod-1", withGeneratedClaim("gpu"), withSchedulerName("default-scheduler"), withNodeName("node-a"))
	hungry := makePod("pod-1", withGeneratedClaim("gpu"), withSchedulerName("draplane"), withRequests("2", "1Gi"))
	// Bound by someone else, without claims: they count all the same.
	busy := makePod("busy", withSchedulerName("default-scheduler"), withNodeName("node-a"), withRequests("3", "1Gi"))
	busyDone := makePod("busy", withSchedulerName("default-scheduler"), withNodeName("node-a"), withRequests("3", "1Gi"))
	busyDone.Status.Phase = corev1.PodSucceeded
	crowded := []*corev1.Node{makeNode("node-a", withAllocatable("4", "8Gi", 1)), makeNode("node-b", big)}
	// Without claims: placed by node fit alone when it names draplane.
	plain := makePod("pod-1", withSchedulerName("draplane"), withRequests("2", "1Gi"))
	plainTheirs := makePod("pod-1", withSchedulerName("default-scheduler"), withRequests("2", "1Gi"))

	tests := map[string]testCase{
		"pod of draplane: allocated with upstream's finalizer, reserved and bound": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes: nodes, slices: gpusOnA,
			pods:                []*corev1.Pod{ours},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(ours, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
			expectedFinalizers:  map[string][]string{"pod-1-gpu": {podmode.UpstreamFinalizer}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"pod of another scheduler: left alone": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes: nodes, slices: gpusOnA,
			pods:                []*corev1.Pod{theirs},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(theirs, "gpu")},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
			expectNoClaimWrites: true,
		},
		"pod of another scheduler bound with its claim unallocated: left alone": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes: nodes, slices: gpusOnA,
			pods:                []*corev1.Pod{theirsBound},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(theirsBound, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
			expectNoClaimWrites: true,
		},
		"the node with the devices lacks cpu: pending, naming both": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes: nodes, slices: gpusOnA,
			pods:                  []*corev1.Pod{busy, hungry},
			keys:                  []string{podKey(hungry)},
			claims:                []*resourcev1.ResourceClaim{generatedClaim(hungry, "gpu")},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": ""},
			expectedUnschedulable: map[string]string{"pod-1": "1 Insufficient cpu"},
			expectedErrors:        []string{"unschedulable"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedEventText:     []string{"node-b"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"a done pod on the node counts for nothing": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes: nodes, slices: gpusOnA,
			pods:                []*corev1.Pod{busyDone, hungry},
			keys:                []string{podKey(hungry)},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(hungry, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a", "busy": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"pod of draplane without claims: bound where it fits": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes:            nodes,
			pods:             []*corev1.Pod{busy, plain},
			keys:             []string{podKey(plain)},
			expectedNodes:    map[string]string{"pod-1": "node-b", "busy": "node-a"},
			expectedEvents:   []string{"Normal Scheduled"},
			expectedAttempts: map[string]int{resultPlaced: 1},
		},
		"pod of draplane without claims that fits nowhere: pending": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes:                 []*corev1.Node{nodes[0]},
			pods:                  []*corev1.Pod{busy, plain},
			keys:                  []string{podKey(plain)},
			expectedNodes:         map[string]string{"pod-1": "", "busy": "node-a"},
			expectedUnschedulable: map[string]string{"pod-1": "1 Insufficient cpu"},
			expectedErrors:        []string{"unschedulable"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"pod of another scheduler without claims: left alone": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes:         nodes,
			pods:          []*corev1.Pod{plainTheirs},
			keys:          []string{podKey(plainTheirs)},
			expectedNodes: map[string]string{"pod-1": ""},
		},
		"a node full of pods: the other one": {
			mode: mode, fitNodeResources: true, finalizer: podmode.UpstreamFinalizer,
			nodes: crowded, slices: gpusOnBoth,
			pods:                []*corev1.Pod{busyDone, makePod("other", withNodeName("node-a")), ours},
			keys:                []string{podKey(ours)},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(ours, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-b", "busy": "node-a", "other": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-b/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			runSyncTest(t, tc)
		})
	}
}
