package podclaims

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

// Group claims (KEP-5729): a PodGroup names claims in spec.resourceClaims
// that its pods share. A pod uses the group's claim instead of one of its
// own when its spec.resourceClaims entry equals the group's entry in every
// field (name, resourceClaimName, resourceClaimTemplateName). The claim is
// reserved for the PodGroup as one consumer, and a claim generated from
// the group's template is owned by the PodGroup and recorded in
// podgroup.status.resourceClaimStatuses (and in the pods' status, as any
// generated claim).

const (
	// PodGroupResource is the resource of a PodGroup consumer in
	// reservedFor; its APIGroup is scheduling.k8s.io.
	PodGroupResource = "podgroups"

	// PodsByGroupIndex maps "<namespace>/<group>" to the pods that name
	// the PodGroup in spec.schedulingGroup. Controllers that share a pod
	// informer share the index (AddPodsByGroupIndex).
	PodsByGroupIndex = "pods-by-group"
)

// GroupClaimsEnabled says whether PodGroup-level claims are acted on
// (DRAWorkloadResourceClaims, which needs GenericWorkload's PodGroups).
func GroupClaimsEnabled() bool {
	return features.Enabled(features.DRAWorkloadResourceClaims) && features.Enabled(features.GenericWorkload)
}

// GroupOf names the PodGroup of a pod, or "".
func GroupOf(pod *corev1.Pod) string {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return *pod.Spec.SchedulingGroup.PodGroupName
}

// GroupClaimFor returns the PodGroup's claim entry that the pod claim
// matches exactly, or nil: then the pod claim is the pod's own. group may
// be nil (no group, or its claims are not acted on).
func GroupClaimFor(pod *corev1.Pod, group *schedulingv1beta1.PodGroup, podClaim PodClaim) *schedulingv1beta1.PodGroupResourceClaim {
	if group == nil || podClaim.Err != nil || podClaim.ExtendedResources ||
		group.Namespace != pod.Namespace || GroupOf(pod) != group.Name {
		return nil
	}
	for i := range group.Spec.ResourceClaims {
		entry := &group.Spec.ResourceClaims[i]
		if entry.Name == podClaim.Name &&
			ptr.Equal(entry.ResourceClaimName, podClaim.ClaimName) &&
			ptr.Equal(entry.ResourceClaimTemplateName, podClaim.TemplateName) {
			return entry
		}
	}
	return nil
}

// GroupClaimName returns the name of the ResourceClaim behind a group
// claim entry, as ClaimName does for a pod claim: nil without error when
// no claim is needed, ErrClaimNotGenerated while the claim generated from
// the template is not recorded in the group's status.
func GroupClaimName(group *schedulingv1beta1.PodGroup, entry *schedulingv1beta1.PodGroupResourceClaim) (*string, error) {
	switch {
	case entry.ResourceClaimName != nil:
		return entry.ResourceClaimName, nil
	case entry.ResourceClaimTemplateName != nil:
		for _, status := range group.Status.ResourceClaimStatuses {
			if status.Name == entry.Name {
				return status.ResourceClaimName, nil
			}
		}
		return nil, ErrClaimNotGenerated
	default:
		return nil, ErrUnsupportedPodClaim
	}
}

// GroupConsumer is the reservedFor entry of a PodGroup.
func GroupConsumer(group *schedulingv1beta1.PodGroup) resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{
		APIGroup: schedulingv1beta1.GroupName,
		Resource: PodGroupResource,
		Name:     group.Name,
		UID:      group.UID,
	}
}

// PodConsumer is the reservedFor entry of a pod.
func PodConsumer(pod *corev1.Pod) resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}
}

// IsGroupConsumer says whether the reservedFor entry is a PodGroup.
func IsGroupConsumer(consumer resourcev1.ResourceClaimConsumerReference) bool {
	return consumer.APIGroup == schedulingv1beta1.GroupName && consumer.Resource == PodGroupResource
}

// IsReservedFor reports whether the consumer (by UID) is in reservedFor.
func IsReservedFor(claim *resourcev1.ResourceClaim, consumer resourcev1.ResourceClaimConsumerReference) bool {
	for _, reserved := range claim.Status.ReservedFor {
		if reserved.UID == consumer.UID {
			return true
		}
	}
	return false
}

// OwningPodGroup returns the PodGroup that a claim was generated for (its
// controller owner reference), or empty values.
func OwningPodGroup(claim *resourcev1.ResourceClaim) (string, metav1.OwnerReference) {
	for _, owner := range claim.OwnerReferences {
		if owner.Controller != nil && *owner.Controller && owner.Kind == "PodGroup" &&
			strings.HasPrefix(owner.APIVersion, schedulingv1beta1.GroupName+"/") {
			return owner.Name, owner
		}
	}
	return "", metav1.OwnerReference{}
}

// isForPodsGroup: the claim was generated for the pod's PodGroup. Pods
// do not know their group's UID, so the name decides, as upstream's.
func isForPodsGroup(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	if !GroupClaimsEnabled() {
		return false
	}
	name, _ := OwningPodGroup(claim)
	return name != "" && name == GroupOf(pod) && claim.Namespace == pod.Namespace
}

// isReservedForPodsGroup: the pod's PodGroup is a consumer of the claim
// (by name, as above).
func isReservedForPodsGroup(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	group := GroupOf(pod)
	if group == "" || !GroupClaimsEnabled() {
		return false
	}
	for _, consumer := range claim.Status.ReservedFor {
		if IsGroupConsumer(consumer) && consumer.Name == group {
			return true
		}
	}
	return false
}

// AddPodsByGroupIndex adds PodsByGroupIndex to the pod informer unless it
// has it already.
func AddPodsByGroupIndex(informer cache.SharedIndexInformer) error {
	return addIndexOnce(informer, PodsByGroupIndex, podsByGroupIndexFunc)
}

func podsByGroupIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if group := GroupOf(pod); group != "" {
		return []string{pod.Namespace + "/" + group}, nil
	}
	return nil, nil
}
