package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestSlicesOfNodeDeletedWhileControllersDown: a slice without an owner
// for a Node the controllers saw goes when the controllers start after the
// Node was deleted while they were not running; a slice published for a
// node that never registered stays.
func TestSlicesOfNodeDeletedWhileControllersDown(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	s.MustKubectl(t, `apiVersion: v1
kind: Node
metadata:
  name: down-node
---
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: down-node-slice
spec:
  driver: down.example.com
  nodeName: down-node
  pool: {name: down-node, generation: 1, resourceSliceCount: 1}
  devices:
  - name: d0
---
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: early-node-slice
spec:
  driver: down.example.com
  nodeName: early-node
  pool: {name: early-node, generation: 1, resourceSliceCount: 1}
  devices:
  - name: d0
`, "apply", "-f", "-")
	slices := func() string {
		return strings.TrimSpace(s.MustKubectl(t, "", "get", "resourceslices", "-o", "name"))
	}
	// The controllers saw the Node with its slice.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return s.MustKubectl(t, "", "get", "resourceslice", "down-node-slice", "-o", `jsonpath={.metadata.annotations.resource\.draplane\.dev/node-uid}`) != "", nil
	}); err != nil {
		t.Fatalf("the slice never got its node's UID noted:\n%s", s.MustKubectl(t, "", "get", "resourceslices", "-o", "yaml"))
	}

	// The Node goes while no controller runs.
	s.Stop()
	args := s.args
	s.args = append(append([]string{}, args...), "--controllers=false")
	s.Restart(t)
	s.MustKubectl(t, "", "delete", "node", "down-node")
	if got := slices(); !strings.Contains(got, "down-node-slice") {
		t.Fatalf("without controllers the slice went already: %s", got)
	}
	s.Stop()
	s.args = args
	s.Restart(t)

	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return slices() == "resourceslice.resource.draplane.dev/early-node-slice", nil
	}); err != nil {
		t.Fatalf("after the controllers started, slices: %s; want only early-node-slice", slices())
	}
}
