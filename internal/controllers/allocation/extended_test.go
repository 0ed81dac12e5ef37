package allocation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

// withGPUs: the container asks for n devices of the test class by its
// implicit extended resource name.
func withGPUs(n string) podOption {
	return func(pod *corev1.Pod) {
		name := corev1.ResourceName(podclaims.DeviceClassResourcePrefix + testClass)
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{name: resource.MustParse(n)}
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{name: resource.MustParse(n)}
	}
}

// withExtendedClaim: the claim for the pod's extended resources is
// recorded as "<pod>-extended-resources".
func withExtendedClaim() podOption {
	return func(pod *corev1.Pod) {
		pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{
			ResourceClaimName: pod.Name + "-extended-resources",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{
				ContainerName: "ctr", ResourceName: podclaims.DeviceClassResourcePrefix + testClass, RequestName: "container-0-request-0",
			}},
		}
	}
}

// extendedClaim is the claim of withExtendedClaim, asking for count
// devices.
func extendedClaim(pod *corev1.Pod, count int64) *resourcev1.ResourceClaim {
	claim := makeClaim(pod.Name + "-extended-resources")
	isTrue := true
	claim.Annotations = map[string]string{podclaims.ExtendedResourceClaimAnnotation: "true"}
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &isTrue}}
	claim.Spec.Devices.Requests[0].Name = "container-0-request-0"
	claim.Spec.Devices.Requests[0].Exactly.Count = count
	return claim
}

func TestSyncPodExtendedResources(t *testing.T) {
	nodes := []*corev1.Node{makeNode("node-a"), makeNode("node-b")}
	slices := []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100"), makeSlice("node-b", 2, "a100")}
	on := func(c *testController) { c.extendedResources = true }
	waiting := makePod("pod-1", withGeneratedClaim("gpu"), withGPUs("2"))
	recorded := makePod("pod-1", withGPUs("2"), withExtendedClaim())
	mixed := makePod("pod-1", withGeneratedClaim("gpu"), withGPUs("1"), withExtendedClaim())
	tooBig := makePod("pod-1", withGPUs("3"), withExtendedClaim())

	for name, tc := range map[string]testCase{
		"pod waits for the claim of its extended resources": {
			nodes: nodes, slices: slices, before: on,
			pods:                []*corev1.Pod{waiting},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(waiting, "gpu")},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
			expectNoClaimWrites: true,
		},
		"without extended resources handling the other claims go ahead": {
			nodes: nodes, slices: slices,
			pods:                []*corev1.Pod{waiting},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(waiting, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"two devices on one node": {
			nodes: nodes, slices: slices, before: on,
			pods:                []*corev1.Pod{recorded},
			claims:              []*resourcev1.ResourceClaim{extendedClaim(recorded, 2)},
			expectedNodes:       map[string]string{"pod-1": "node-b"},
			expectedAllocations: map[string]string{"pod-1-extended-resources": "node-b/gpu-0,node-b/gpu-1"},
			expectedReservedFor: map[string][]string{"pod-1-extended-resources": {"pod-1"}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"allocated together with the other claims": {
			nodes: nodes, slices: slices, before: on,
			pods:                []*corev1.Pod{mixed},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(mixed, "gpu"), extendedClaim(mixed, 1)},
			expectedNodes:       map[string]string{"pod-1": "node-b"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-b/gpu-0", "pod-1-extended-resources": "node-b/gpu-1"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}, "pod-1-extended-resources": {"pod-1"}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     2,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"more than any node has": {
			nodes: nodes, slices: slices, before: on,
			pods:                  []*corev1.Pod{tooBig},
			claims:                []*resourcev1.ResourceClaim{extendedClaim(tooBig, 3)},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-extended-resources": ""},
			expectedUnschedulable: map[string]string{"pod-1": "0/2 nodes fit"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedEventText:     []string{"claim default/pod-1-extended-resources request container-0-request-0"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
	} {
		t.Run(name, func(t *testing.T) { runSyncTest(t, tc) })
	}
}
