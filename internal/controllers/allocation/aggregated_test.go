package allocation

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
)

// withHostClaim is withGeneratedClaim for a pod of a host cluster: the
// claim is named in the annotations and the pod carries our gate.
func withHostClaim(podClaim string) podOption {
	return func(pod *corev1.Pod) {
		template := "template"
		name := pod.Name + "-" + podClaim
		claims, _ := json.Marshal([]corev1.PodResourceClaim{{Name: podClaim, ResourceClaimTemplateName: &template}})
		statuses, _ := json.Marshal([]corev1.PodResourceClaimStatus{{Name: podClaim, ResourceClaimName: &name}})
		pod.Annotations = map[string]string{
			podclaims.ClaimsAnnotation:        string(claims),
			podclaims.ClaimStatusesAnnotation: string(statuses),
		}
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: podclaims.SchedulingGate})
	}
}

func withGate(name string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: name})
	}
}

// TestSyncPodAggregated: the same sync places host pods by node affinity
// and removing the gate instead of binding them.
func TestSyncPodAggregated(t *testing.T) {
	three := []*corev1.Node{makeNode("node-a"), makeNode("node-b"), makeNode("node-c")}
	threeSlices := []*resourcev1.ResourceSlice{makeSlice("node-a", 2, "a100"), makeSlice("node-b", 2, "a100"), makeSlice("node-c", 2, "h100")}
	hostPod := makePod("pod-1", withHostClaim("gpu"))
	otherGate := makePod("pod-1", withHostClaim("gpu"), withGate("example.com/wait"))
	ungated := makePod("pod-1", withHostClaim("gpu"))
	ungated.Spec.SchedulingGates = nil
	bound := makePod("pod-1", withHostClaim("gpu"), withNodeName("node-b"))
	bound.Spec.SchedulingGates = nil

	tests := map[string]struct {
		testCase
		// expectedPinned maps pod name to the node its required node
		// affinity names, "" for none.
		expectedPinned map[string]string
		// expectedGates maps pod name to its remaining gates.
		expectedGates map[string][]string
	}{
		"gated host pod: allocated, reserved, pinned and ungated, not bound": {
			testCase: testCase{
				nodes: three, slices: threeSlices,
				pods:                []*corev1.Pod{hostPod},
				claims:              []*resourcev1.ResourceClaim{generatedClaim(hostPod, "gpu")},
				expectedNodes:       map[string]string{"pod-1": ""},
				expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
				expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
				expectedEvents:      []string{"Normal Scheduled"},
				expectedPending:     1,
				expectedAttempts:    map[string]int{resultPlaced: 1},
			},
			expectedPinned: map[string]string{"pod-1": "node-a"},
			expectedGates:  map[string][]string{"pod-1": nil},
		},
		"another gate: left alone": {
			testCase: testCase{
				nodes: three, slices: threeSlices,
				pods:                []*corev1.Pod{otherGate},
				claims:              []*resourcev1.ResourceClaim{generatedClaim(otherGate, "gpu")},
				expectedNodes:       map[string]string{"pod-1": ""},
				expectedAllocations: map[string]string{"pod-1-gpu": ""},
			},
			expectedPinned: map[string]string{"pod-1": ""},
			expectedGates:  map[string][]string{"pod-1": {podclaims.SchedulingGate, "example.com/wait"}},
		},
		"without our gate: the host scheduler's pod": {
			testCase: testCase{
				nodes: three, slices: threeSlices,
				pods:                []*corev1.Pod{ungated},
				claims:              []*resourcev1.ResourceClaim{generatedClaim(ungated, "gpu")},
				expectedNodes:       map[string]string{"pod-1": ""},
				expectedAllocations: map[string]string{"pod-1-gpu": ""},
			},
			expectedPinned: map[string]string{"pod-1": ""},
		},
		"bound by the host scheduler: claims allocated on its node": {
			testCase: testCase{
				nodes: three, slices: threeSlices,
				pods:                []*corev1.Pod{bound},
				claims:              []*resourcev1.ResourceClaim{generatedClaim(bound, "gpu")},
				expectedNodes:       map[string]string{"pod-1": "node-b"},
				expectedAllocations: map[string]string{"pod-1-gpu": "node-b/gpu-0"},
				expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
				expectedPending:     1,
				expectedAttempts:    map[string]int{resultAllocated: 1},
			},
			expectedPinned: map[string]string{"pod-1": ""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.mode = podmode.Aggregated
			runSyncTest(t, tc.testCase)

			// runSyncTest used a controller of its own; look at the
			// objects again through a fresh one with the same input.
			_, ctx := ktesting.NewTestContext(t)
			c := newTestController(t, klog.FromContext(ctx), tc.testCase)
			for _, pod := range tc.pods {
				if err := c.syncPod(ctx, podKey(pod)); err != nil {
					t.Fatalf("sync: %v", err)
				}
			}
			for podName, node := range tc.expectedPinned {
				pod, err := c.kubeClient.CoreV1().Pods(testNamespace).Get(ctx, podName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := pinnedNode(pod); got != node {
					t.Errorf("pod %s: expected node affinity for %q, got %q", podName, node, got)
				}
				if want, ok := tc.expectedGates[podName]; ok {
					var got []string
					for _, gate := range pod.Spec.SchedulingGates {
						got = append(got, gate.Name)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("pod %s: expected gates %v, got %v", podName, want, got)
					}
				}
			}
		})
	}
}

// pinnedNode is the node named by a metadata.name matchFields requirement
// in every required node selector term, "" if none.
func pinnedNode(pod *corev1.Pod) string {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	node := ""
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchFields {
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				node = r.Values[0]
			}
		}
	}
	return node
}
