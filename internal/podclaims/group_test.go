package podclaims

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

func TestGroupClaims(t *testing.T) {
	group := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "uid-train"},
		Spec: schedulingv1beta1.PodGroupSpec{ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{
			{Name: "fabric", ResourceClaimTemplateName: ptr.To("fabric")},
			{Name: "shared", ResourceClaimName: ptr.To("shared-claim")},
		}},
	}
	member := func(claims ...corev1.PodResourceClaim) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns", UID: "uid-pod"},
			Spec:       corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}, ResourceClaims: claims},
		}
	}
	groupOwned := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "train-fabric-x", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "train", UID: "uid-train", Controller: ptr.To(true)}}}}
	reservedForGroup := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared-claim", Namespace: "ns"},
		Status: resourcev1.ResourceClaimStatus{ReservedFor: []resourcev1.ResourceClaimConsumerReference{GroupConsumer(group)}}}

	tests := map[string]struct {
		gateOff       bool
		pod           *corev1.Pod
		wantEntry     string
		claim         *resourcev1.ResourceClaim
		wantForPod    bool
		wantReserved  bool
		checkReserved bool
	}{
		"template entry equal in every field": {
			pod:        member(corev1.PodResourceClaim{Name: "fabric", ResourceClaimTemplateName: ptr.To("fabric")}),
			wantEntry:  "fabric",
			claim:      groupOwned,
			wantForPod: true,
		},
		"claim entry equal": {
			pod:           member(corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To("shared-claim")}),
			wantEntry:     "shared",
			claim:         reservedForGroup,
			checkReserved: true,
			wantReserved:  true,
		},
		"other pod claim name: the pod's own": {
			pod:        member(corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("fabric")}),
			claim:      groupOwned,
			wantForPod: true, // generated for its group all the same
		},
		"other template: the pod's own": {
			pod: member(corev1.PodResourceClaim{Name: "fabric", ResourceClaimTemplateName: ptr.To("other")}),
		},
		"template where the group names a claim: the pod's own": {
			pod: member(corev1.PodResourceClaim{Name: "shared", ResourceClaimTemplateName: ptr.To("shared-claim")}),
		},
		"pod of another group": {
			pod: func() *corev1.Pod {
				pod := member(corev1.PodResourceClaim{Name: "fabric", ResourceClaimTemplateName: ptr.To("fabric")})
				pod.Spec.SchedulingGroup.PodGroupName = ptr.To("eval")
				return pod
			}(),
			claim:         reservedForGroup,
			checkReserved: true,
		},
		"gate off: neither owned nor reserved through the group": {
			gateOff:       true,
			pod:           member(corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To("shared-claim")}),
			wantEntry:     "shared",
			claim:         reservedForGroup,
			checkReserved: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{features.GenericWorkload: true, features.DRAWorkloadResourceClaims: !tc.gateOff})
			entry := GroupClaimFor(tc.pod, group, ClaimsOf(tc.pod)[0])
			got := ""
			if entry != nil {
				got = entry.Name
			}
			if got != tc.wantEntry {
				t.Errorf("GroupClaimFor = %q, want %q", got, tc.wantEntry)
			}
			if tc.claim == nil {
				return
			}
			if tc.checkReserved {
				if got := IsReservedForPod(tc.pod, tc.claim); got != tc.wantReserved {
					t.Errorf("IsReservedForPod = %v, want %v", got, tc.wantReserved)
				}
				return
			}
			if err := IsForPod(tc.pod, tc.claim); (err == nil) != tc.wantForPod {
				t.Errorf("IsForPod = %v, want for pod %v", err, tc.wantForPod)
			}
		})
	}
}
