package resourceclaim

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
)

// withHostTemplateClaim names the claim in the annotation, as a pod of a
// host cluster does.
func withHostTemplateClaim(podClaimName, templateName string) podOption {
	return func(pod *corev1.Pod) {
		value, _ := json.Marshal([]corev1.PodResourceClaim{{Name: podClaimName, ResourceClaimTemplateName: &templateName}})
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[podclaims.ClaimsAnnotation] = string(value)
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: podclaims.SchedulingGate}}
	}
}

func withAnnotatedClaimStatus(podClaimName, claimName string) podOption {
	return func(pod *corev1.Pod) {
		value, _ := json.Marshal([]corev1.PodResourceClaimStatus{{Name: podClaimName, ResourceClaimName: &claimName}})
		pod.Annotations[podclaims.ClaimStatusesAnnotation] = string(value)
	}
}

// TestSyncAggregated: the same sync generates claims for host pods and
// records them in the annotation instead of the status.
func TestSyncAggregated(t *testing.T) {
	hostPod := makePod("pod-a", "uid-a", withHostTemplateClaim("gpu", "gpu-template"))
	created := expectedGenerated(hostPod, "gpu", 1)
	claim := makeClaim("pod-a-gpu-abcde", generatedFor(hostPod, "gpu"))
	recorded := makePod("pod-a", "uid-a", withHostTemplateClaim("gpu", "gpu-template"), withAnnotatedClaimStatus("gpu", claim.Name))
	gpuTemplate := makeTemplate("gpu-template")
	podKey := func(pod *corev1.Pod) string { return podKeyPrefix + pod.Namespace + "/" + pod.Name }
	status := func(podClaim, claim string) []corev1.PodResourceClaimStatus {
		return []corev1.PodResourceClaimStatus{{Name: podClaim, ResourceClaimName: &claim}}
	}

	tests := map[string]testCase{
		"annotated pod claim: claim generated, annotation written, status untouched": {
			keys:                      []string{podKey(hostPod)},
			pods:                      []*corev1.Pod{hostPod},
			templates:                 []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:            []*resourcev1.ResourceClaim{created},
			expectedAnnotatedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", created.Name)},
			expectedCreates:           map[string]int{createSuccess: 1},
		},
		"recorded in the annotation already: nothing to do": {
			keys:                      []string{podKey(recorded)},
			pods:                      []*corev1.Pod{recorded},
			claims:                    []*resourcev1.ResourceClaim{claim},
			templates:                 []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:            []*resourcev1.ResourceClaim{claim},
			expectedAnnotatedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", claim.Name)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.mode = podmode.Aggregated
			runSyncTest(t, tc)
		})
	}
}
