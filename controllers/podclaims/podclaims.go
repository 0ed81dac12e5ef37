// Package podclaims answers "which ResourceClaims does this pod use" for
// every controller. In standalone mode a pod names its claims in
// spec.resourceClaims and finds generated ones in
// status.resourceClaimStatuses; aggregated mode will read them from
// annotations instead. Only ClaimsOf and StatusOf know where the
// information lives, so that change touches this file only.
package podclaims

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// PodClaim is one claim of a pod: its name inside the pod and where the
// ResourceClaim comes from. Exactly one of ClaimName and TemplateName is
// set in a valid pod.
type PodClaim struct {
	// Name is unique among the claims of the pod.
	Name string
	// ClaimName names an existing ResourceClaim shared with others.
	ClaimName *string
	// TemplateName names the ResourceClaimTemplate from which a claim
	// is generated for this pod only.
	TemplateName *string
}

// ClaimsOf lists the claims a pod uses.
func ClaimsOf(pod *corev1.Pod) []PodClaim {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	claims := make([]PodClaim, 0, len(pod.Spec.ResourceClaims))
	for _, podClaim := range pod.Spec.ResourceClaims {
		claims = append(claims, PodClaim{
			Name:         podClaim.Name,
			ClaimName:    podClaim.ResourceClaimName,
			TemplateName: podClaim.ResourceClaimTemplateName,
		})
	}
	return claims
}

// HasClaims is a cheap check for event handlers.
func HasClaims(pod *corev1.Pod) bool {
	return len(pod.Spec.ResourceClaims) > 0
}

// StatusOf maps the name of a pod claim to the name of the claim generated
// for it. A nil value records that no claim is needed.
func StatusOf(pod *corev1.Pod) map[string]*string {
	if len(pod.Status.ResourceClaimStatuses) == 0 {
		return nil
	}
	statuses := make(map[string]*string, len(pod.Status.ResourceClaimStatuses))
	for _, status := range pod.Status.ResourceClaimStatuses {
		statuses[status.Name] = status.ResourceClaimName
	}
	return statuses
}

var (
	// ErrClaimNotGenerated: the pod claim uses a template and the
	// generated claim is not recorded in the pod status yet.
	ErrClaimNotGenerated = errors.New("ResourceClaim not generated yet")

	// ErrUnsupportedPodClaim: the pod claim sets none of the fields this
	// code knows, probably a newer API. Guessing would be wrong.
	ErrUnsupportedPodClaim = errors.New("pod claim sets no supported field")
)

// ClaimName returns the name of the ResourceClaim behind a pod claim.
// A nil name without error means that no claim is needed. mustCheckOwner
// is true for generated claims: a claim with that name is only the right
// one if the pod owns it (see IsForPod).
func ClaimName(pod *corev1.Pod, podClaim PodClaim) (name *string, mustCheckOwner bool, err error) {
	switch {
	case podClaim.ClaimName != nil:
		return podClaim.ClaimName, false, nil
	case podClaim.TemplateName != nil:
		generated, ok := StatusOf(pod)[podClaim.Name]
		if !ok {
			return nil, false, fmt.Errorf("pod %s/%s, pod claim %s: %w", pod.Namespace, pod.Name, podClaim.Name, ErrClaimNotGenerated)
		}
		return generated, true, nil
	default:
		return nil, false, fmt.Errorf("pod %s/%s, pod claim %s: %w", pod.Namespace, pod.Name, podClaim.Name, ErrUnsupportedPodClaim)
	}
}

// OwningPod returns the pod that a claim was generated for (its
// controller owner reference), or empty values for a claim that was not
// generated for a pod.
func OwningPod(claim *resourcev1.ResourceClaim) (string, metav1.OwnerReference) {
	for _, owner := range claim.OwnerReferences {
		if owner.Controller != nil && *owner.Controller && owner.APIVersion == "v1" && owner.Kind == "Pod" {
			return owner.Name, owner
		}
	}
	return "", metav1.OwnerReference{}
}

// IsForPod checks that a generated claim belongs to this pod instance.
func IsForPod(pod *corev1.Pod, claim *resourcev1.ResourceClaim) error {
	name, owner := OwningPod(claim)
	if name == "" || owner.UID != pod.UID {
		return fmt.Errorf("ResourceClaim %s/%s was not generated for pod %s/%s (uid %s)", claim.Namespace, claim.Name, pod.Namespace, pod.Name, pod.UID)
	}
	return nil
}

// IsReservedForPod reports whether the pod instance is a consumer of the
// claim.
func IsReservedForPod(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.UID == pod.UID {
			return true
		}
	}
	return false
}

// IsDone is true when the pod will never run (again) and thus needs its
// claims no longer: it finished, or it was deleted before it was bound to
// a node (a bound pod might still be running until the node says so).
func IsDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded ||
		pod.Status.Phase == corev1.PodFailed ||
		(pod.DeletionTimestamp != nil && pod.Spec.NodeName == "")
}
