package allocation

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
)

// handles says whether the controller places the pod at all. Standalone
// and aggregated, only pods with claims: others are not ours to bind. In
// cluster mode every pod that names draplane's scheduler is draplane's
// alone, claims or not, as for any scheduler of a schedulerName: one
// without claims is placed by node fit only, and one that waits for the
// claim of its extended resources is seen before that claim is recorded.
func (c *Controller) handles(pod *corev1.Pod) bool {
	if podclaims.HasClaims(pod) {
		return true
	}
	_, cluster := c.mode.(podmode.Cluster)
	return cluster && podmode.Ours(c.mode, pod)
}
