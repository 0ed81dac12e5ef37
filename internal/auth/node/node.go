// Package node restricts node-bound identities (user
// draplane:node:<name> in group draplane:nodes) to their own node's
// objects, as upstream's Node authorizer and NodeRestriction admission do
// for kubelets. The authorizer decides what needs the object looked up
// (claims, pods, nodes); the admission plugin checks what a write carries
// (a slice's node and driver, a node's name). RBAC's draplane:driver role
// says which verbs the group has at all.
package node

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/auth/rbac"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

// Identify returns the node of a node-bound identity.
func Identify(u user.Info) (string, bool) {
	if u == nil {
		return "", false
	}
	name, ok := strings.CutPrefix(u.GetName(), rbac.NodeUserPrefix)
	if !ok || name == "" {
		return "", false
	}
	for _, g := range u.GetGroups() {
		if g == rbac.NodesGroup {
			return name, true
		}
	}
	return "", false
}

// allowedDriver reports whether the identity may publish slices of
// driver: it carries the group draplane:driver:<driver>.
func allowedDriver(u user.Info, driver string) bool {
	for _, g := range u.GetGroups() {
		if g == rbac.DriverGroupPrefix+driver {
			return true
		}
	}
	return false
}

// claimOnNode reports whether a claim is allocated and usable on node:
// its node selector names the node, or it has none (devices reachable
// from every node).
func claimOnNode(claim *resourcev1.ResourceClaim, node string) bool {
	allocation := claim.Status.Allocation
	if allocation == nil {
		return false
	}
	if allocation.NodeSelector == nil {
		return true
	}
	return nodeaffinity.NodeSelectorMatches(allocation.NodeSelector, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
}
