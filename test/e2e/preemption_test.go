package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// preemptionClasses are the PriorityClasses of the preemption tests.
const preemptionClasses = `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: low
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: mid
value: 500
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: higher
value: 1500
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: top
value: 2000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-never
value: 1000
preemptionPolicy: Never
`

// priorityPodYAML is a pod of the class with one GPU from the gpus-1
// template, or, with claim set, using that ResourceClaim.
func priorityPodYAML(name, class, claim string, grace int) string {
	source := "resourceClaimTemplateName: gpus-1"
	if claim != "" {
		source = "resourceClaimName: " + claim
	}
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  priorityClassName: %s
  terminationGracePeriodSeconds: %d
  resourceClaims:
  - name: gpus
    %s
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpus
`, name, class, grace, source)
}

// startPreemptionServer starts a server with one simulated node of the
// given GPUs, the device class, the claim templates and the classes.
func startPreemptionServer(t *testing.T, gpus int) *testServer {
	t.Helper()
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=1", fmt.Sprintf("--simulate-devices-per-node=%d", gpus))
	s.MustKubectl(t, gangSetup+"---\n"+preemptionClasses, "apply", "-f", "-")
	return s
}

func podExists(t *testing.T, s *testServer, name string) bool {
	t.Helper()
	out := s.MustKubectl(t, "", "get", "--ignore-not-found", "-o", "name", name)
	return strings.TrimSpace(out) != ""
}

func preemptionEvents(t *testing.T, s *testServer, name, reason string) string {
	t.Helper()
	return s.MustKubectl(t, "", "get", "events", "--field-selector", "involvedObject.name="+name+",reason="+reason, "-o", `jsonpath={range .items[*]}{.message}{"\n"}{end}`)
}

// TestPreemptionOneVictim: a node with two GPUs held by a low and a mid
// priority pod; a high-priority pod evicts the low one only, gets its GPU,
// and both sides' events say so.
func TestPreemptionOneVictim(t *testing.T) {
	s := startPreemptionServer(t, 2)
	s.MustKubectl(t, priorityPodYAML("batch-low", "low", "", 1)+priorityPodYAML("batch-mid", "mid", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/batch-low", "pod/batch-mid", "--timeout=120s")

	s.MustKubectl(t, priorityPodYAML("inference", "high", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/inference", "--timeout=120s")
	if podExists(t, s, "pod/batch-low") {
		t.Errorf("batch-low still exists")
	}
	if !podExists(t, s, "pod/batch-mid") {
		t.Errorf("batch-mid was evicted too")
	}
	if out := preemptionEvents(t, s, "inference", "Preempting"); !strings.Contains(out, "Preempting pod default/batch-low (priority 100) on node sim-node-0, releasing devices gpu.sim.draplane.dev/sim-node-0/") || strings.Contains(out, "batch-mid") {
		t.Errorf("Preempting events on the preemptor:\n%s", out)
	}
	if out := preemptionEvents(t, s, "batch-low", "Preempted"); !strings.Contains(out, "Preempted by pod default/inference (priority 1000) on node sim-node-0") {
		t.Errorf("Preempted event on the victim:\n%s", out)
	}
	if out := s.MustKubectl(t, "", "describe", "pod", "inference"); !strings.Contains(out, "Preempting pod default/batch-low") {
		t.Errorf("kubectl describe pod inference does not name the victim:\n%s", out)
	}
	if got := s.MustKubectl(t, "", "get", "pod", "inference", "-o", "jsonpath={.status.nominatedNodeName}"); got != "" {
		t.Errorf("nominatedNodeName of the placed preemptor: %q", got)
	}
}

// TestPreemptionNeverAndEqual: a pod with preemptionPolicy Never, and one
// of the same priority as the pods running, wait; nothing is evicted and
// their condition and events say why.
func TestPreemptionNeverAndEqual(t *testing.T) {
	s := startPreemptionServer(t, 1)
	s.MustKubectl(t, priorityPodYAML("batch-high", "high", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/batch-high", "--timeout=120s")
	// Below it: cannot preempt at all.
	s.MustKubectl(t, priorityPodYAML("never", "low", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=PodScheduled=false", "pod/never", "--timeout=120s")
	s.MustKubectl(t, "", "delete", "pod", "never", "--wait")

	s.MustKubectl(t, "", "delete", "pod", "batch-high", "--wait")
	s.MustKubectl(t, priorityPodYAML("batch-low", "low", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/batch-low", "--timeout=120s")
	s.MustKubectl(t, priorityPodYAML("never", "high-never", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=PodScheduled=false", "pod/never", "--timeout=120s")
	if msg := s.MustKubectl(t, "", "get", "pod", "never", "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`); !strings.Contains(msg, "preemption does not help: preemptionPolicy is Never") {
		t.Errorf("PodScheduled message of the Never pod: %s", msg)
	}
	if out := s.MustKubectl(t, "", "describe", "pod", "never"); !strings.Contains(out, "preemptionPolicy is Never") {
		t.Errorf("kubectl describe pod never does not say why:\n%s", out)
	}

	s.MustKubectl(t, priorityPodYAML("equal", "low", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=PodScheduled=false", "pod/equal", "--timeout=120s")
	if msg := s.MustKubectl(t, "", "get", "pod", "equal", "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`); !strings.Contains(msg, "preemption does not help") {
		t.Errorf("PodScheduled message of the equal-priority pod: %s", msg)
	}
	if !podExists(t, s, "pod/batch-low") {
		t.Fatalf("batch-low was evicted")
	}
	if got := s.MustKubectl(t, "", "get", "pod", "batch-low", "-o", "jsonpath={.metadata.deletionTimestamp}"); got != "" {
		t.Errorf("batch-low is being deleted: %s", got)
	}
}

// sharedClaimYAML is a ResourceClaim of one GPU.
const sharedClaimYAML = `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: shared
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.sim.draplane.dev
`

// TestPreemptionSharedClaim: one GPU in a claim shared by a low and a high
// pod, the other held by a top pod. A mid pod cannot free anything: the
// low consumer alone frees nothing, so it stays. A higher pod evicts both
// consumers.
func TestPreemptionSharedClaim(t *testing.T) {
	s := startPreemptionServer(t, 2)
	s.MustKubectl(t, sharedClaimYAML, "apply", "-f", "-")
	s.MustKubectl(t, priorityPodYAML("share-low", "low", "shared", 1)+priorityPodYAML("share-high", "high", "shared", 1)+priorityPodYAML("batch-top", "top", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/share-low", "pod/share-high", "pod/batch-top", "--timeout=120s")

	s.MustKubectl(t, priorityPodYAML("mid", "mid", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=PodScheduled=false", "pod/mid", "--timeout=120s")
	if msg := s.MustKubectl(t, "", "get", "pod", "mid", "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`); !strings.Contains(msg, "preemption does not help") {
		t.Errorf("PodScheduled message of the mid pod: %s", msg)
	}
	if got := s.MustKubectl(t, "", "get", "pod", "share-low", "-o", "jsonpath={.metadata.deletionTimestamp}"); got != "" {
		t.Errorf("share-low is being deleted although that frees nothing")
	}
	s.MustKubectl(t, "", "delete", "pod", "mid", "--wait")

	s.MustKubectl(t, priorityPodYAML("higher", "higher", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/higher", "--timeout=120s")
	for _, gone := range []string{"pod/share-low", "pod/share-high"} {
		if podExists(t, s, gone) {
			t.Errorf("%s still exists", gone)
		}
	}
	if !podExists(t, s, "pod/batch-top") {
		t.Errorf("batch-top was evicted")
	}
}

// TestPreemptionAbandoned: the preemptor is deleted while its victim
// terminates; the waiting low pod then gets the victim's GPU as usual.
func TestPreemptionAbandoned(t *testing.T) {
	s := startPreemptionServer(t, 1)
	s.MustKubectl(t, priorityPodYAML("victim", "low", "", 5), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/victim", "--timeout=120s")
	s.MustKubectl(t, priorityPodYAML("preemptor", "high", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=jsonpath={.status.nominatedNodeName}=sim-node-0", "pod/preemptor", "--timeout=120s")
	if got := s.MustKubectl(t, "", "get", "pod", "victim", "-o", `jsonpath={.status.conditions[?(@.type=="DisruptionTarget")].reason}`); got != "PreemptionByScheduler" {
		t.Errorf("DisruptionTarget reason of the victim: %q", got)
	}
	s.MustKubectl(t, priorityPodYAML("waiting", "low", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "delete", "pod", "preemptor", "--wait")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/waiting", "--timeout=120s")
	if podExists(t, s, "pod/victim") {
		t.Errorf("the victim still exists")
	}
}

// TestPreemptionGang: two nodes of two GPUs, each GPU held by a low pod;
// a gang of two pods with two GPUs each, of high priority through its
// PodGroup's priorityClassName (its pods have none), preempts all four,
// across both nodes, and runs whole.
func TestPreemptionGang(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=2", gangGates)
	s.MustKubectl(t, gangSetup+"---\n"+preemptionClasses, "apply", "-f", "-")
	var small strings.Builder
	for i := range 4 {
		small.WriteString(priorityPodYAML(fmt.Sprintf("small-%d", i), "low", "", 1))
	}
	s.MustKubectl(t, small.String(), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/small-0", "pod/small-1", "pod/small-2", "pod/small-3", "--timeout=120s")

	// The class is the PodGroup's only: its pods have the default
	// priority 0, below the small pods'. The Priority admission resolves
	// the PodGroup's class into spec.priority, and the gang preempts with it.
	gang := strings.Replace(gangYAML("train", 2, 2, "gpus-2", ""), "spec:\n  schedulingPolicy:", "spec:\n  priorityClassName: high\n  schedulingPolicy:", 1)
	s.MustKubectl(t, gang, "apply", "-f", "-")
	if got := s.MustKubectl(t, "", "get", "podgroup", "train", "-o", "jsonpath={.spec.priority}"); got != "1000" {
		t.Errorf("PodGroup spec.priority %q, want 1000 from class high", got)
	}
	for _, tc := range []struct{ name, spec, want string }{
		{"unknown", "  priorityClassName: gold\n", "no PriorityClass with name gold was found"},
		{"disagrees", "  priorityClassName: high\n  priority: 5\n", "the integer value of priority (5) must not be provided in pod group spec"},
	} {
		bad := strings.Replace(gangYAML("bad-"+tc.name, 1, 0, "gpus-2", ""), "spec:\n", "spec:\n"+tc.spec, 1)
		out, err := s.Kubectl(t, bad, "create", "-f", "-")
		if err == nil || !strings.Contains(out, "Forbidden") || !strings.Contains(out, tc.want) {
			t.Errorf("PodGroup with %s: err %v, output %q, want Forbidden with %q", tc.name, err, out, tc.want)
		}
	}
	waitGroupCondition(t, s, "train", "true")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=train", "--timeout=120s")
	nodes := gangNodes(t, s, "train")
	if len(nodes) != 2 || nodes["train-0"] == nodes["train-1"] || nodes["train-0"] == "" {
		t.Errorf("gang on nodes %v, want two nodes", nodes)
	}
	for i := range 4 {
		if name := fmt.Sprintf("pod/small-%d", i); podExists(t, s, name) {
			t.Errorf("%s still exists", name)
		}
	}
	out := preemptionEvents(t, s, "train-0", "Preempting")
	for _, node := range []string{"sim-node-0", "sim-node-1"} {
		if !strings.Contains(out, "on node "+node) && !strings.Contains(preemptionEvents(t, s, "train-1", "Preempting"), node) {
			t.Errorf("no Preempting event names node %s:\n%s", node, out)
		}
	}
}

// TestPreemptionGangLaterMember: a later member of a placed gang preempts
// like a single pod. One node of two GPUs: the high-priority gang (minCount
// 1) is placed with one member, a low pod takes the other GPU, then a
// second member comes: it evicts the low pod and runs.
func TestPreemptionGangLaterMember(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=1", "--simulate-devices-per-node=2", gangGates)
	s.MustKubectl(t, gangSetup+"---\n"+preemptionClasses, "apply", "-f", "-")
	gang := strings.Replace(gangYAML("late", 1, 1, "gpus-1", ""), "spec:\n  schedulingPolicy:", "spec:\n  priorityClassName: high\n  schedulingPolicy:", 1)
	s.MustKubectl(t, gang, "apply", "-f", "-")
	waitGroupCondition(t, s, "late", "true")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/late-0", "--timeout=120s")
	s.MustKubectl(t, priorityPodYAML("small", "low", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/small", "--timeout=120s")

	s.MustKubectl(t, gangPodYAML("late-1", "late", "gpus-1"), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/late-1", "--timeout=120s")
	if podExists(t, s, "pod/small") {
		t.Error("pod/small still exists")
	}
	if out := preemptionEvents(t, s, "late-1", "Preempting"); !strings.Contains(out, "default/small") {
		t.Errorf("late-1's Preempting events do not name default/small:\n%s", out)
	}
}

// TestPreemptionGangDisruptionAll: the members of a PodGroup whose
// disruptionMode is all are preempted all together or not at all, and
// weigh as many pods as they are. One node of three GPUs: a gang of two
// low pods (one GPU each) and one low pod alone. A first high pod evicts
// the lone pod, not one gang member (which alone would sort first); a
// second high pod evicts both members, though one GPU would do.
func TestPreemptionGangDisruptionAll(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=1", "--simulate-devices-per-node=3", gangGates)
	s.MustKubectl(t, gangSetup+"---\n"+preemptionClasses, "apply", "-f", "-")
	gang := strings.Replace(gangYAML("a-whole", 2, 2, "gpus-1", ""), "spec:\n  schedulingPolicy:", "spec:\n  priorityClassName: low\n  disruptionMode:\n    all: {}\n  schedulingPolicy:", 1)
	s.MustKubectl(t, gang, "apply", "-f", "-")
	if got := s.MustKubectl(t, "", "get", "podgroup", "a-whole", "-o", "jsonpath={.spec.disruptionMode}"); got != `{"all":{}}` {
		t.Fatalf("PodGroup spec.disruptionMode %q, want all", got)
	}
	s.MustKubectl(t, priorityPodYAML("lone", "low", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/a-whole-0", "pod/a-whole-1", "pod/lone", "--timeout=120s")

	s.MustKubectl(t, priorityPodYAML("first", "high", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/first", "--timeout=120s")
	if podExists(t, s, "pod/lone") {
		t.Errorf("pod/lone still exists: the first high pod should have preempted it rather than the gang of two")
	}
	for _, member := range []string{"pod/a-whole-0", "pod/a-whole-1"} {
		if !podExists(t, s, member) {
			t.Errorf("%s was preempted, though the lone pod was the cheaper victim", member)
		}
	}

	s.MustKubectl(t, priorityPodYAML("second", "high", "", 1), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/second", "--timeout=120s")
	s.MustKubectl(t, "", "wait", "--for=delete", "pod/a-whole-0", "pod/a-whole-1", "--timeout=120s")
	out := preemptionEvents(t, s, "second", "Preempting")
	for _, member := range []string{"default/a-whole-0", "default/a-whole-1"} {
		if !strings.Contains(out, "Preempting pod "+member) {
			t.Errorf("second's Preempting events do not name %s:\n%s", member, out)
		}
	}
}
