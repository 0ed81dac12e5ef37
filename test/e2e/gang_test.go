package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// gangSetup is the DeviceClass of the simulated GPUs and a claim template
// per GPU count.
const gangSetup = `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: gpu.sim.draplane.dev
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.sim.draplane.dev"
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: gpus-1
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.sim.draplane.dev
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: gpus-2
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.sim.draplane.dev
          count: 2
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: gpus-4
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.sim.draplane.dev
          count: 4
`

// gangYAML is a gang PodGroup and its pods, each with a claim from the
// template.
func gangYAML(group string, minCount, pods int, template, topologyKey string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: %s
spec:
  schedulingPolicy:
    gang:
      minCount: %d
`, group, minCount)
	if topologyKey != "" {
		fmt.Fprintf(&b, "  schedulingConstraints:\n    topology:\n    - key: %s\n", topologyKey)
	}
	for i := 0; i < pods; i++ {
		b.WriteString(gangPodYAML(fmt.Sprintf("%s-%d", group, i), group, template))
	}
	return b.String()
}

func gangPodYAML(name, group, template string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    group: %s
spec:
  schedulingGroup:
    podGroupName: %s
  resourceClaims:
  - name: gpus
    resourceClaimTemplateName: %s
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpus
`, name, group, group, template)
}

// gangNodes lists each pod of the group with its node ("" while unbound).
func gangNodes(t *testing.T, s *testServer, group string) map[string]string {
	t.Helper()
	out := s.MustKubectl(t, "", "get", "pods", "-l", "group="+group, "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}`)
	nodes := map[string]string{}
	for _, line := range strings.Fields(out) {
		name, node, _ := strings.Cut(line, "=")
		nodes[name] = node
	}
	return nodes
}

// allocatedClaims counts the group's pods' claims that are allocated.
func allocatedClaims(t *testing.T, s *testServer, group string) int {
	t.Helper()
	out := s.MustKubectl(t, "", "get", "resourceclaims", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.allocation.devices.results[0].device}{"\n"}{end}`)
	n := 0
	for _, line := range strings.Split(out, "\n") {
		name, device, _ := strings.Cut(line, " ")
		if strings.HasPrefix(name, group+"-") && device != "" {
			n++
		}
	}
	return n
}

func waitGroupCondition(t *testing.T, s *testServer, group, status string) {
	t.Helper()
	s.MustKubectl(t, "", "wait", "--for=condition=PodGroupInitiallyScheduled="+status, "podgroup/"+group, "--timeout=120s")
}

// TestGangFits: a gang of four pods with two GPUs each on four nodes of
// two GPUs is placed whole; a fifth pod created later joins the placed
// group when it fits, and waits when it does not.
func TestGangFits(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=5", "--simulate-devices-per-node=2", gangGates)
	s.MustKubectl(t, gangSetup, "apply", "-f", "-")
	s.MustKubectl(t, gangYAML("train", 4, 4, "gpus-2", ""), "apply", "-f", "-")
	waitGroupCondition(t, s, "train", "true")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=train", "--timeout=120s")
	nodes := gangNodes(t, s, "train")
	distinct := map[string]bool{}
	for pod, node := range nodes {
		if node == "" {
			t.Errorf("pod %s not bound", pod)
		}
		distinct[node] = true
	}
	if len(nodes) != 4 || len(distinct) != 4 {
		t.Errorf("pods on nodes %v, want 4 pods on 4 nodes", nodes)
	}
	if out := s.MustKubectl(t, "", "get", "podgroup", "train"); !strings.Contains(out, "True") {
		t.Errorf("kubectl get podgroup:\n%s", out)
	}
	if out := s.MustKubectl(t, "", "get", "events", "--field-selector", "involvedObject.kind=PodGroup,reason=Scheduled"); !strings.Contains(out, "4 pods placed on 4 nodes") {
		t.Errorf("no Scheduled event on the group:\n%s", out)
	}

	// A later pod joins: one node is left with two GPUs.
	s.MustKubectl(t, gangPodYAML("train-4", "train", "gpus-2"), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/train-4", "--timeout=120s")
	// One more does not fit; it waits, the others keep running.
	s.MustKubectl(t, gangPodYAML("train-5", "train", "gpus-2"), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=PodScheduled=false", "pod/train-5", "--timeout=120s")
}

// TestGangDoesNotFit: three pods of two GPUs on two nodes of two GPUs:
// two would fit, the gang does not. Nothing is allocated or reserved,
// no pod is bound, and the group's condition and event name the pod, the
// claim and why.
func TestGangDoesNotFit(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=2", gangGates)
	s.MustKubectl(t, gangSetup, "apply", "-f", "-")
	s.MustKubectl(t, gangYAML("big", 3, 3, "gpus-2", ""), "apply", "-f", "-")
	waitGroupCondition(t, s, "big", "false")
	for pod, node := range gangNodes(t, s, "big") {
		if node != "" {
			t.Errorf("pod %s bound to %s", pod, node)
		}
	}
	if n := allocatedClaims(t, s, "big"); n != 0 {
		t.Errorf("%d claims allocated for a gang that does not fit\n%s", n, dumpState(t, s, "default"))
	}
	message := s.MustKubectl(t, "", "get", "podgroup", "big", "-o", `jsonpath={.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].message}`)
	for _, want := range []string{"pod default/big-2", "claim default/big-2-gpus-", "request gpus", "on 1 nodes"} {
		if !strings.Contains(message, want) {
			t.Errorf("condition message %q lacks %q", message, want)
		}
	}
	describe := s.MustKubectl(t, "", "describe", "podgroup", "big")
	if !strings.Contains(describe, "FailedScheduling") || !strings.Contains(describe, "pod default/big-2 cannot be placed with the others") {
		t.Errorf("kubectl describe podgroup lacks the event:\n%s", describe)
	}
	if out := s.MustKubectl(t, "", "get", "pod", "big-0", "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`); !strings.Contains(out, "PodGroup big:") {
		t.Errorf("pod condition %q does not name the group", out)
	}
}

// TestGangsCompete: two gangs that each need the whole cluster: one runs
// whole, the other holds nothing; once the first is gone the second runs
// whole.
func TestGangsCompete(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=2", gangGates)
	s.MustKubectl(t, gangSetup, "apply", "-f", "-")
	s.MustKubectl(t, gangYAML("a", 2, 2, "gpus-2", "")+"---\n"+gangYAML("b", 2, 2, "gpus-2", ""), "apply", "-f", "-")

	var winner, loser string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		a := s.MustKubectl(t, "", "get", "podgroup", "a", "-o", `jsonpath={.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].status}`)
		b := s.MustKubectl(t, "", "get", "podgroup", "b", "-o", `jsonpath={.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].status}`)
		switch {
		case a == "True" && b == "False":
			winner, loser = "a", "b"
		case b == "True" && a == "False":
			winner, loser = "b", "a"
		case a == "True" && b == "True":
			return false, fmt.Errorf("both gangs placed")
		}
		return winner != "", nil
	})
	if err != nil {
		t.Fatalf("one gang placed and the other refused: %v\n%s", err, dumpState(t, s, "default"))
	}
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group="+winner, "--timeout=120s")
	for pod, node := range gangNodes(t, s, loser) {
		if node != "" {
			t.Errorf("pod %s of the waiting gang bound to %s", pod, node)
		}
	}
	if n := allocatedClaims(t, s, loser); n != 0 {
		t.Errorf("the waiting gang holds %d claims", n)
	}

	s.MustKubectl(t, "", "delete", "pods", "-l", "group="+winner, "--grace-period=1")
	waitGroupCondition(t, s, loser, "true")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group="+loser, "--timeout=120s")
}

// TestGangTopology: rack-a has three nodes with three free GPUs each (9),
// rack-b two nodes with four (8). A gang of two pods with four GPUs each
// and the topology key rack goes to rack-b, the only rack where it fits,
// though rack-a has more free GPUs in total (and sorts first).
func TestGangTopology(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=5", "--simulate-devices-per-node=4", gangGates)
	s.MustKubectl(t, gangSetup, "apply", "-f", "-")
	for i, rack := range []string{"rack-a", "rack-a", "rack-a", "rack-b", "rack-b"} {
		s.MustKubectl(t, "", "label", "node", fmt.Sprintf("sim-node-%d", i), "example.com/rack="+rack)
	}
	// One GPU taken on each node of rack-a.
	var fillers []string
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("filler-%d", i)
		fillers = append(fillers, "pod/"+name)
		s.MustKubectl(t, strings.Replace(gangPodYAML(name, "none", "gpus-1"), "  schedulingGroup:\n    podGroupName: none\n", fmt.Sprintf("  nodeName: sim-node-%d\n", i), 1), "apply", "-f", "-")
	}
	s.MustKubectl(t, "", append([]string{"wait", "--for=condition=Ready", "--timeout=120s"}, fillers...)...)

	s.MustKubectl(t, gangYAML("rack", 2, 2, "gpus-4", "example.com/rack"), "apply", "-f", "-")
	waitGroupCondition(t, s, "rack", "true")
	for pod, node := range gangNodes(t, s, "rack") {
		if node != "sim-node-3" && node != "sim-node-4" {
			t.Errorf("pod %s on %q, want a node of rack-b", pod, node)
		}
	}
	if out := s.MustKubectl(t, "", "get", "events", "--field-selector", "involvedObject.kind=PodGroup,reason=Scheduled"); !strings.Contains(out, "in example.com/rack=rack-b") {
		t.Errorf("Scheduled event does not name the rack:\n%s", out)
	}
}

// TestGangBacktracking: one node with two GPUs; pod bt-0 takes any GPU,
// bt-1 needs index 0. Placed one after the other, bt-0 takes the first
// GPU (index 0) and bt-1 never fits; placed as one decision, bt-0 gets
// index 1. With backtracking switched off (--gang-placement-greedy) the
// same gang stays unplaced.
func TestGangBacktracking(t *testing.T) {
	requireKubectl(t)
	objects := gangSetup + `---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: gpu-index-0
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.sim.draplane.dev
          selectors:
          - cel:
              expression: device.attributes["gpu.sim.draplane.dev"].index == 0
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: bt
spec:
  schedulingPolicy:
    gang:
      minCount: 2
` + gangPodYAML("bt-0", "bt", "gpus-1") + gangPodYAML("bt-1", "bt", "gpu-index-0")
	for _, tc := range []struct {
		name   string
		args   []string
		placed bool
	}{
		{name: "backtracking", placed: true},
		{name: "greedy", args: []string{"--gang-placement-greedy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, t.TempDir(), append([]string{"--simulate-nodes=1", "--simulate-devices-per-node=2", gangGates}, tc.args...)...)
			s.MustKubectl(t, objects, "apply", "-f", "-")
			if !tc.placed {
				waitGroupCondition(t, s, "bt", "false")
				message := s.MustKubectl(t, "", "get", "podgroup", "bt", "-o", `jsonpath={.status.conditions[?(@.type=="PodGroupInitiallyScheduled")].message}`)
				if !strings.Contains(message, "pod default/bt-1") {
					t.Errorf("condition message %q does not name bt-1", message)
				}
				if n := allocatedClaims(t, s, "bt"); n != 0 {
					t.Errorf("%d claims allocated", n)
				}
				return
			}
			waitGroupCondition(t, s, "bt", "true")
			s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/bt-0", "pod/bt-1", "--timeout=120s")
			out := s.MustKubectl(t, "", "get", "resourceclaims", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.allocation.devices.results[0].device}{"\n"}{end}`)
			if !strings.Contains(out, "bt-0-gpus-") || !strings.Contains(out, " gpu-1\n") {
				t.Errorf("claims:\n%s\nwant bt-0 on gpu-1", out)
			}
		})
	}
}
