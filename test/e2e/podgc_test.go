package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestPodsOfDeletedNodeRemoved: a pod bound to a Node, with a claim from a
// template allocated on that node, goes when the Node is deleted (as
// upstream's pod garbage collector does), and its generated claim and the
// node's slice follow.
func TestPodsOfDeletedNodeRemoved(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	s.MustKubectl(t, `apiVersion: v1
kind: Node
metadata:
  name: gc-node
---
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: gc-node-slice
spec:
  driver: gc.example.com
  nodeName: gc-node
  pool: {name: gc-node, generation: 1, resourceSliceCount: 1}
  devices:
  - name: d0
---
apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: gc.example.com
spec:
  selectors:
  - cel: {expression: device.driver == "gc.example.com"}
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: gc-one
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: d
        exactly: {deviceClassName: gc.example.com}
`, "apply", "-f", "-")
	s.MustKubectl(t, claimPodYAML("gc-pod", "dev", "template=gc-one", "nodeName: gc-node"), "apply", "-f", "-")

	// The pod's claim is allocated and reserved on the node.
	claimsOfPod := func() string {
		return strings.TrimSpace(s.MustKubectl(t, "", "get", "resourceclaims", "-n", "default", "-o",
			`jsonpath={range .items[*]}{.metadata.ownerReferences[0].name} {.status.reservedFor[0].name}{"\n"}{end}`))
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return claimsOfPod() == "gc-pod gc-pod", nil
	}); err != nil {
		t.Fatalf("the pod's claim was never reserved for it:\n%s", s.MustKubectl(t, "", "get", "pods,resourceclaims", "-A", "-o", "wide"))
	}

	s.MustKubectl(t, "", "delete", "node", "gc-node")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		out := s.MustKubectl(t, "", "get", "pods,resourceclaims,resourceslices", "-A", "--no-headers", "--ignore-not-found")
		return strings.TrimSpace(out) == "", nil
	}); err != nil {
		t.Fatalf("the deleted node's pod, claim or slice is still there:\n%s", s.MustKubectl(t, "", "get", "pods,resourceclaims,resourceslices", "-A", "-o", "wide"))
	}
}
