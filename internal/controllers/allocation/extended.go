package allocation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/draplane/draplane/internal/podclaims"
)

// extendedResourceClaimPending says what the pod waits for when it asks
// for extended resources that a DeviceClass backs and the claim for them
// is not recorded in its status yet (the resource claim controller makes
// it), or "". Placing the pod without that claim would give it a node
// without its devices.
func (c *Controller) extendedResourceClaimPending(pod *corev1.Pod) (string, error) {
	if !c.extendedResources || podclaims.ExtendedResourceClaimName(pod) != "" || len(podclaims.ExtendedResourceCandidates(pod)) == 0 {
		return "", nil
	}
	classes, err := c.classLister.List(labels.Everything())
	if err != nil {
		return "", fmt.Errorf("list device classes from cache: %w", err)
	}
	if !podclaims.NeedsExtendedResourceClaim(pod, podclaims.NewClassResolver(classes)) {
		return "", nil
	}
	return "claim for extended resources not recorded in the pod status yet", nil
}
