package e2e

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestGangExample runs examples/gang as examples/README.md says: six
// simulated nodes of four GPUs in two racks. Gang "train" (8 pods, 2 GPUs
// each) runs whole on the four nodes of rack-a, two pods per node; gang
// "eval" waits whole, holding nothing, though rack-b could take half of
// it; once train's pods are gone, eval runs whole.
func TestGangExample(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=6", "--simulate-devices-per-node=4", gangGates)
	for i, rack := range []string{"rack-a", "rack-a", "rack-a", "rack-a", "rack-b", "rack-b"} {
		s.MustKubectl(t, "", "label", "node", fmt.Sprintf("sim-node-%d", i), "example.com/rack="+rack)
	}
	examples := filepath.Join(repoRoot, "examples")
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(examples, "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(examples, "gang", "01-two-gpus.yaml"), "-f", filepath.Join(examples, "gang", "02-train.yaml"))
	waitGroupCondition(t, s, "train", "true")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=train", "--timeout=120s")
	perNode := map[string]int{}
	for pod, node := range gangNodes(t, s, "train") {
		if node == "" {
			t.Errorf("pod %s not bound", pod)
		}
		perNode[node]++
	}
	var nodes []string
	for node, n := range perNode {
		nodes = append(nodes, fmt.Sprintf("%s=%d", node, n))
	}
	sort.Strings(nodes)
	if got := strings.Join(nodes, ","); got != "sim-node-0=2,sim-node-1=2,sim-node-2=2,sim-node-3=2" {
		t.Errorf("train's pods per node %s, want two on each node of rack-a", got)
	}

	s.MustKubectl(t, "", "apply", "-f", filepath.Join(examples, "gang", "03-eval.yaml"))
	waitGroupCondition(t, s, "eval", "false")
	for pod, node := range gangNodes(t, s, "eval") {
		if node != "" {
			t.Errorf("pod %s of the waiting gang bound to %s", pod, node)
		}
	}
	if n := allocatedClaims(t, s, "eval"); n != 0 {
		t.Errorf("the waiting gang holds %d claims", n)
	}
	if describe := s.MustKubectl(t, "", "describe", "podgroup", "eval"); !strings.Contains(describe, "example.com/rack") {
		t.Errorf("kubectl describe podgroup eval does not say which racks were tried:\n%s", describe)
	}

	s.MustKubectl(t, "", "delete", "pods", "-l", "group=train", "--grace-period=1")
	waitGroupCondition(t, s, "eval", "true")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=eval", "--timeout=120s")
	for pod, node := range gangNodes(t, s, "eval") {
		if !strings.HasPrefix(node, "sim-node-") || node >= "sim-node-4" {
			t.Errorf("pod %s of eval on %q, want a node of rack-a", pod, node)
		}
	}
}
