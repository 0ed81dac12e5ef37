// Package podclaims answers "which ResourceClaims does this pod use" for
// every controller. In standalone mode a pod names its claims in
// spec.resourceClaims and finds generated ones in
// status.resourceClaimStatuses. A pod of a host cluster (aggregated mode)
// cannot name our claims in its spec, where the host would take them for
// resource.k8s.io claims: it lists them in the ClaimsAnnotation and finds
// generated ones in the ClaimStatusesAnnotation. Only ClaimsOf and
// StatusOf know where the information lives, and they read both places.
//
// The package is the read side every part shares: the controllers, the
// node agent of the driver library and the node authorizer. It sits below
// all of them, as upstream's k8s.io/dynamic-resource-allocation/resourceclaim
// does; its leaf nodeaffinity says whether a claim's allocation reaches a
// node (NodeSelectorMatches), for them and the allocator. How controllers
// write into a pod (record generated claims, place the pod on a node)
// differs between the modes; that one switch, controllers/podmode, stays
// with the controllers.
package podclaims

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

const (
	// ClaimsAnnotation on a pod lists its claims as JSON, shaped like
	// spec.resourceClaims: [{"name":"gpu","resourceClaimTemplateName":"t"}].
	ClaimsAnnotation = "resource.draplane.dev/claims"
	// ClaimStatusesAnnotation on a pod records the generated claims as
	// JSON, shaped like status.resourceClaimStatuses:
	// [{"name":"gpu","resourceClaimName":"pod-gpu-x7k2p"}].
	ClaimStatusesAnnotation = "resource.draplane.dev/claim-statuses"
	// SchedulingGate keeps a host pod away from the host scheduler until
	// its claims are allocated and it is pinned to the chosen node.
	SchedulingGate = "resource.draplane.dev/allocation"
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
	// Err is set when the pod's ClaimsAnnotation cannot be parsed; the
	// PodClaim then stands for the whole annotation and ClaimName
	// returns Err.
	Err error
	// ExtendedResources marks the claim made for the pod's extended
	// resources, recorded in status.extendedResourceClaimStatus; its
	// Name is ExtendedResourcesPodClaim.
	ExtendedResources bool
}

// ClaimsOf lists the claims a pod uses: spec.resourceClaims, then those
// of the ClaimsAnnotation whose names are not taken yet, then the claim
// recorded for its extended resources.
func ClaimsOf(pod *corev1.Pod) []PodClaim {
	claims := podClaimsOf(pod)
	if ExtendedResourceClaimName(pod) != "" {
		claims = append(claims, PodClaim{Name: ExtendedResourcesPodClaim, ExtendedResources: true})
	}
	return claims
}

func podClaimsOf(pod *corev1.Pod) []PodClaim {
	annotation, hasAnnotation := pod.Annotations[ClaimsAnnotation]
	if len(pod.Spec.ResourceClaims) == 0 && !hasAnnotation {
		return nil
	}
	claims := make([]PodClaim, 0, len(pod.Spec.ResourceClaims))
	seen := make(map[string]bool, len(pod.Spec.ResourceClaims))
	for _, podClaim := range pod.Spec.ResourceClaims {
		seen[podClaim.Name] = true
		claims = append(claims, PodClaim{
			Name:         podClaim.Name,
			ClaimName:    podClaim.ResourceClaimName,
			TemplateName: podClaim.ResourceClaimTemplateName,
		})
	}
	if !hasAnnotation {
		return claims
	}
	var annotated []corev1.PodResourceClaim
	if err := json.Unmarshal([]byte(annotation), &annotated); err != nil {
		return append(claims, PodClaim{Name: ClaimsAnnotation, Err: fmt.Errorf("annotation %s: %w", ClaimsAnnotation, err)})
	}
	for _, podClaim := range annotated {
		if seen[podClaim.Name] {
			continue
		}
		seen[podClaim.Name] = true
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
	if len(pod.Spec.ResourceClaims) > 0 || ExtendedResourceClaimName(pod) != "" {
		return true
	}
	_, ok := pod.Annotations[ClaimsAnnotation]
	return ok
}

// StatusOf maps the name of a pod claim to the name of the claim generated
// for it. A nil value records that no claim is needed. It reads
// status.resourceClaimStatuses and the ClaimStatusesAnnotation; the status
// wins where both name a pod claim. An annotation that cannot be parsed
// counts as absent: the claims are then generated (or found) again.
func StatusOf(pod *corev1.Pod) map[string]*string {
	annotation, hasAnnotation := pod.Annotations[ClaimStatusesAnnotation]
	if len(pod.Status.ResourceClaimStatuses) == 0 && !hasAnnotation {
		return nil
	}
	statuses := make(map[string]*string, len(pod.Status.ResourceClaimStatuses))
	if hasAnnotation {
		var annotated []corev1.PodResourceClaimStatus
		if err := json.Unmarshal([]byte(annotation), &annotated); err == nil {
			for _, status := range annotated {
				statuses[status.Name] = status.ResourceClaimName
			}
		}
	}
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
	case podClaim.Err != nil:
		return nil, false, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, podClaim.Err)
	case podClaim.ExtendedResources:
		name := ExtendedResourceClaimName(pod)
		if name == "" {
			return nil, false, fmt.Errorf("pod %s/%s, extended resources: %w", pod.Namespace, pod.Name, ErrClaimNotGenerated)
		}
		return &name, true, nil
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

// IsForPod checks that a generated claim belongs to this pod instance,
// or to its PodGroup (a group claim generated from the group's template).
func IsForPod(pod *corev1.Pod, claim *resourcev1.ResourceClaim) error {
	if isForPodsGroup(pod, claim) {
		return nil
	}
	name, owner := OwningPod(claim)
	if name == "" || owner.UID != pod.UID {
		return fmt.Errorf("ResourceClaim %s/%s was not generated for pod %s/%s (uid %s)", claim.Namespace, claim.Name, pod.Namespace, pod.Name, pod.UID)
	}
	return nil
}

// IsReservedForPod reports whether the pod instance is a consumer of the
// claim, itself or through its PodGroup.
func IsReservedForPod(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.UID == pod.UID {
			return true
		}
	}
	return isReservedForPodsGroup(pod, claim)
}

// IsDone is true when the pod will never run (again) and thus needs its
// claims no longer: it finished, or it was deleted before it was bound to
// a node (a bound pod might still be running until the node says so).
func IsDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded ||
		pod.Status.Phase == corev1.PodFailed ||
		(pod.DeletionTimestamp != nil && pod.Spec.NodeName == "")
}
