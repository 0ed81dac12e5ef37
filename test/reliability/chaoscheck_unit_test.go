package reliability

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// The checkers of TestChaos fed broken histories, each seen failing on
// what its invariant forbids and only then (fast; always runs).
//
// TestChaos itself was seen failing on real code broken for one run each
// (DRAPLANE_SEED=11 or 101, the break reverted after):
//   - the node agent's saveLocked returning before it writes
//     (invariant 3): "claim default/chaos-0007-gpu-… was prepared on
//     agent-node-0 (1 calls) and never unprepared";
//   - syncGroup taking every gang as placed, so that members bind one by
//     one (invariant 2): "gang gang-0092 is partially bound: 6 of 15
//     members bound, minCount 12";
//   - the resourceclaim controller keeping every pod consumer
//     (invariants 4 and 6): "claim shared-2 reserved for pod chaos-0067
//     (…), which is gone, for 45s (bound 45s)" and "not settled 3m0s after
//     the faults stopped: claim chaos-0000-gpu-… reserved for pod
//     chaos-0000, which is gone".
//   - the upstream test driver's unprepare leaving the CDI spec in place
//     (invariant 3, seed 11): "CDI spec …/cdi/upstream.example.com-<claim
//     UID>.json left behind on agent-node-0", for each of the 20 claims
//     prepared;
//   - its prepare writing no CDI spec (invariant 3, seed 101): "claim
//     default/chaos-0019-gpu-5nkfj is prepared on agent-node-0 but its CDI
//     spec upstream.example.com-….json is missing for 3s (bound 3s)", for
//     13 of the 15 claims prepared (the other two were unprepared sooner).

func chaosClaim(name string, owner types.UID, devices ...string) resourcev1.ResourceClaim {
	c := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if owner != "" {
		c.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "p", UID: owner}}
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: string(owner), UID: owner}}
	}
	if len(devices) > 0 {
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: simDriver, Pool: "sim-node-0", Device: d})
		}
	}
	return c
}

func chaosTestPod(name, gang, node string, phase corev1.PodPhase, conditions ...corev1.PodCondition) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)}}
	if gang != "" {
		p.Labels = map[string]string{chaosGangLabel: gang}
	}
	p.Spec.NodeName, p.Status.Phase, p.Status.Conditions = node, phase, conditions
	return p
}

func wantProblems(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: problems %q, want %d", what, got, len(want))
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%s: problem %q, want one with %q", what, got[i], want[i])
		}
	}
}

func TestChaosCheckerDoubleAllocation(t *testing.T) {
	admin := chaosClaim("admin", "", "gpu-0")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	fine := []resourcev1.ResourceClaim{chaosClaim("a", "", "gpu-0"), chaosClaim("b", "", "gpu-1"), admin, chaosClaim("none", "")}
	wantProblems(t, "distinct devices", doubleAllocations(fine))
	wantProblems(t, "one device in two claims", doubleAllocations(append(fine, chaosClaim("c", "", "gpu-1"))),
		"device gpu.sim.draplane.dev/sim-node-0/gpu-1 allocated to default/b and default/c at once")
	wantProblems(t, "one device twice in a claim", doubleAllocations([]resourcev1.ResourceClaim{chaosClaim("d", "", "gpu-2", "gpu-2")}),
		"device gpu.sim.draplane.dev/sim-node-0/gpu-2 listed twice in the allocation of default/d")
}

func TestChaosCheckerPartialGang(t *testing.T) {
	gangs := map[string]gangRecord{"whole": {4, 3}, "waiting": {2, 2}, "partial": {3, 3}, "holding": {2, 2}, "broken": {3, 3}}
	s := chaosSnapshot{pods: []corev1.Pod{
		chaosTestPod("whole-0", "whole", "n", corev1.PodRunning), chaosTestPod("whole-1", "whole", "n", corev1.PodRunning),
		chaosTestPod("whole-2", "whole", "n", corev1.PodRunning), chaosTestPod("whole-3", "whole", "", corev1.PodPending),
		chaosTestPod("waiting-0", "waiting", "", corev1.PodPending), chaosTestPod("waiting-1", "waiting", "", corev1.PodPending),
		chaosTestPod("partial-0", "partial", "n", corev1.PodRunning), chaosTestPod("partial-1", "partial", "", corev1.PodPending),
		chaosTestPod("partial-2", "partial", "", corev1.PodPending),
		chaosTestPod("holding-0", "holding", "", corev1.PodPending), chaosTestPod("holding-1", "holding", "", corev1.PodPending),
		// broken lost a member to a node deletion: not judged.
		chaosTestPod("broken-0", "broken", "n", corev1.PodRunning),
	}, claims: []resourcev1.ResourceClaim{chaosClaim("whole-0-gpu", "whole-0", "gpu-0"), chaosClaim("holding-1-gpu", "holding-1", "gpu-1")}}
	problems, judged := partialGangs(s, gangs)
	wantProblems(t, "gangs", problems,
		"gang holding has no member bound but its claim holding-1-gpu holds 1 devices",
		"gang partial is partially bound: 1 of 3 members bound, minCount 3")
	if judged != 4 {
		t.Errorf("%d gangs judged, want 4 (all but broken)", judged)
	}
}

func TestChaosCheckerUnprepare(t *testing.T) {
	calls := parsePluginLog("I0101 noise\nPREPARE claims=default/a,default/b\nPREPARE claims=default/c\nUNPREPARE claims=default/a\nUNPREPARE claims=default/b,default/a\nUNPREPARE claims=default/x\n")
	if calls.prepares["default/a"] != 1 || calls.unprepares["default/a"] != 2 || calls.prepares["default/c"] != 1 {
		t.Fatalf("parsed %+v", calls)
	}
	problems, _ := unprepareProblems("node-0", calls, 0, 2)
	wantProblems(t, "no agent kill", problems,
		"claim default/a was unprepared 2 times on node-0, whose agent was killed 0 times",
		"claim default/c was prepared on node-0 (1 calls) and never unprepared",
		"1 claims unprepared again on node-0, whose agent was killed 0 times (at most 2 unprepares in flight)",
		"claim default/x was unprepared on node-0 and never prepared there")
	problems, repeats := unprepareProblems("node-0", calls, 1, 2)
	wantProblems(t, "one agent kill", problems,
		"claim default/c was prepared on node-0 (1 calls) and never unprepared",
		"claim default/x was unprepared on node-0 and never prepared there")
	if repeats != 1 {
		t.Errorf("%d repeats, want 1", repeats)
	}
	// One kill interrupts at most inFlight unprepares: three claims
	// unprepared again after one kill with one worker is one too many
	// (an agent that did not write its checkpoint after unpreparing).
	calls = parsePluginLog("PREPARE claims=default/a\nPREPARE claims=default/b\nPREPARE claims=default/c\nUNPREPARE claims=default/a\nUNPREPARE claims=default/b\nUNPREPARE claims=default/c\nUNPREPARE claims=default/a\nUNPREPARE claims=default/b\nUNPREPARE claims=default/c\n")
	problems, repeats = unprepareProblems("node-0", calls, 1, 2)
	wantProblems(t, "repeats after one kill", problems, "3 claims unprepared again on node-0, whose agent was killed 1 times (at most 2 unprepares in flight)")
	if repeats != 3 {
		t.Errorf("%d repeats, want 3", repeats)
	}
}

func TestChaosCheckerStaleReferences(t *testing.T) {
	victim := chaosClaim("victim-gpu", "victim", "gpu-0")
	nominated := chaosTestPod("preemptor", "", "", corev1.PodPending)
	nominated.Status.NominatedNodeName = "gone-node"
	s := chaosSnapshot{pods: []corev1.Pod{nominated}, claims: []resourcev1.ResourceClaim{victim}, nodes: map[string]bool{"sim-node-0": true}}
	st := newStaleTracker()
	t0 := time.Now()
	for _, after := range []time.Duration{0, 20 * time.Second, 40 * time.Second} {
		wantProblems(t, "within the bound", st.observe(t0.Add(after), staleReferences(s), chaosStaleBound))
	}
	wantProblems(t, "past the bound", st.observe(t0.Add(46*time.Second), staleReferences(s), chaosStaleBound),
		"pod preemptor nominated to node gone-node, which does not exist, for 46s",
		"claim victim-gpu reserved for pod victim (victim), which is gone, for 46s")
	wantProblems(t, "reported once", st.observe(t0.Add(50*time.Second), staleReferences(s), chaosStaleBound))
	// Freed in time: forgotten, and counted from scratch if it comes back.
	s.claims, s.pods = nil, nil
	wantProblems(t, "freed", st.observe(t0.Add(51*time.Second), staleReferences(s), chaosStaleBound))
}

func TestChaosCheckerSettle(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "no node fits"}
	s := chaosSnapshot{pods: []corev1.Pod{
		chaosTestPod("running", "", "n", corev1.PodRunning),
		chaosTestPod("waiting", "", "", corev1.PodPending, unschedulable),
	}, claims: []resourcev1.ResourceClaim{chaosClaim("running-gpu", "running", "gpu-0")}}
	wantProblems(t, "settled", settleProblems(s))
	s.pods = append(s.pods, chaosTestPod("silent", "", "", corev1.PodPending), chaosTestPod("stuck", "", "n", corev1.PodPending, unschedulable),
		chaosTestPod("failed", "", "n", corev1.PodFailed))
	s.claims = append(s.claims, chaosClaim("orphan", "gone", "gpu-1"), chaosClaim("unused", "", "gpu-2"))
	wantProblems(t, "not settled", settleProblems(s),
		"pod silent (node \"\") is Pending with no reason",
		"pod stuck (node \"n\") is Pending with no reason",
		"pod failed is Failed",
		"claim orphan reserved for pod gone, which is gone",
		"claim unused is allocated with no consumer")
}

func TestChaosCheckerCDISpecs(t *testing.T) {
	prepared := parsePluginLog("PREPARE claims=default/a,default/b\nUNPREPARE claims=default/b\nPREPARE claims=default/c\nUNPREPARE claims=default/c\nPREPARE claims=default/c\nPREPARE claims=default/gone\n").prepared
	if len(prepared) != 3 || !prepared["default/a"] || prepared["default/b"] || !prepared["default/c"] {
		t.Fatalf("prepared now: %v, want default/a, default/c and default/gone", prepared)
	}
	claims := []resourcev1.ResourceClaim{chaosClaim("a", ""), chaosClaim("b", ""), chaosClaim("c", "")}
	for i := range claims {
		claims[i].UID = types.UID("uid-" + claims[i].Name)
	}
	files := map[string]bool{cdiSpecName("uid-a"): true, cdiSpecName("uid-c"): true}
	missing := missingCDISpecs("node-0", prepared, claims, files)
	if len(missing) != 0 {
		t.Errorf("every prepared claim has its spec, yet missing: %v", missing)
	}
	delete(files, cdiSpecName("uid-c"))
	missing = missingCDISpecs("node-0", prepared, claims, files)
	st := newStaleTracker()
	t0 := time.Now()
	wantProblems(t, "missing once", st.observe(t0, missing, chaosCDIBound))
	wantProblems(t, "missing for a round", st.observe(t0.Add(time.Second), missing, chaosCDIBound))
	wantProblems(t, "missing past the bound", st.observe(t0.Add(4*time.Second), missing, chaosCDIBound),
		"claim default/c is prepared on node-0 but its CDI spec upstream.example.com-uid-c.json is missing")

	wantProblems(t, "empty dir", leftoverCDISpecs("node-0", "/cdi", nil))
	wantProblems(t, "left behind", leftoverCDISpecs("node-0", "/cdi", []string{cdiSpecName("uid-b"), ".upstream.example.com-uid-d.json.tmp"}),
		"CDI spec /cdi/upstream.example.com-uid-b.json left behind on node-0",
		"CDI spec /cdi/.upstream.example.com-uid-d.json.tmp left behind on node-0")
}
