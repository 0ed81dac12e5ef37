package allocation

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

// consumerFor is whom the claim is reserved for when the pod uses it: the
// pod's PodGroup when the pod claim behind it is one of the group's claims
// (KEP-5729), else the pod. A group claim is then reserved once for the
// whole group, however many pods use it. A claim generated from the
// group's template must also be owned by the group: a pod claim that was
// given a claim of its own before the group named the template keeps it.
func (s *placementState) consumerFor(pod *corev1.Pod, claim *resourcev1.ResourceClaim) resourcev1.ResourceClaimConsumerReference {
	if group := s.groupWithClaims(pod); group != nil {
		for _, podClaim := range podclaims.ClaimsOf(pod) {
			entry := podclaims.GroupClaimFor(pod, group, podClaim)
			if entry == nil {
				continue
			}
			name, _, err := podclaims.ClaimName(pod, podClaim)
			if err != nil || name == nil || *name != claim.Name {
				continue
			}
			if entry.ResourceClaimTemplateName != nil {
				if owner, _ := podclaims.OwningPodGroup(claim); owner != group.Name {
					continue
				}
			}
			return podclaims.GroupConsumer(group)
		}
	}
	return podclaims.PodConsumer(pod)
}

// groupWithClaims returns the pod's PodGroup when it names claims that
// are acted on, else nil.
func (s *placementState) groupWithClaims(pod *corev1.Pod) *schedulingv1beta1.PodGroup {
	name := podclaims.GroupOf(pod)
	if s.podGroupLister == nil || name == "" || !podclaims.GroupClaimsEnabled() {
		return nil
	}
	group, err := s.podGroupLister.PodGroups(pod.Namespace).Get(name)
	if err != nil || len(group.Spec.ResourceClaims) == 0 {
		return nil
	}
	return group
}
