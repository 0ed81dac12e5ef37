package reliability

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// The invariants of TestChaos, as functions of one consistent snapshot
// (a list answers at one revision) or of the plugins' logs, so that
// TestChaosCheckers can feed each a broken history.

// chaosSnapshot is what one round of the checker lists.
type chaosSnapshot struct {
	at     time.Time
	pods   []corev1.Pod
	claims []resourcev1.ResourceClaim
	nodes  map[string]bool
}

// gangRecord is a gang the workload created: its size and minCount.
type gangRecord struct {
	size, minCount int
}

// doubleAllocations (invariant 1): no device in two allocated claims, or
// twice in one; admin access may share a device. No claim of the mix uses
// consumable capacity.
func doubleAllocations(claims []resourcev1.ResourceClaim) []string {
	var problems []string
	owner := map[string]string{}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		key := claim.Namespace + "/" + claim.Name
		inClaim := map[string]bool{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			d := r.Driver + "/" + r.Pool + "/" + r.Device
			if inClaim[d] {
				problems = append(problems, fmt.Sprintf("device %s listed twice in the allocation of %s (resourceVersion %s)", d, key, claim.ResourceVersion))
			}
			inClaim[d] = true
			if other, ok := owner[d]; ok && other != key {
				problems = append(problems, fmt.Sprintf("device %s allocated to %s and %s at once", d, other, key))
			}
			owner[d] = key
		}
	}
	return problems
}

// partialGangs (invariant 2, on a settled snapshot): a gang with fewer
// than minCount members bound has none bound and holds no device. Only
// gangs with all their members are judged: one that lost members to a
// node deletion or a preemption may keep the rest running, as upstream's
// gang scheduling does.
func partialGangs(s chaosSnapshot, gangs map[string]gangRecord) (problems []string, judged int) {
	members := map[string][]corev1.Pod{}
	for _, p := range s.pods {
		if g := p.Labels[chaosGangLabel]; g != "" && p.DeletionTimestamp == nil {
			members[g] = append(members[g], p)
		}
	}
	for _, name := range sortedNames(gangs) {
		g := gangs[name]
		pods := members[name]
		if len(pods) != g.size {
			continue
		}
		judged++
		bound := 0
		uids := map[string]bool{}
		for _, p := range pods {
			uids[string(p.UID)] = true
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound > 0 && bound < g.minCount {
			problems = append(problems, fmt.Sprintf("gang %s is partially bound: %d of %d members bound, minCount %d", name, bound, g.size, g.minCount))
		}
		if bound > 0 {
			continue
		}
		for _, c := range s.claims {
			if c.Status.Allocation == nil {
				continue
			}
			for _, ref := range c.OwnerReferences {
				if uids[string(ref.UID)] || (ref.Kind == "PodGroup" && ref.Name == name) {
					problems = append(problems, fmt.Sprintf("gang %s has no member bound but its claim %s holds %d devices", name, c.Name, len(c.Status.Allocation.Devices.Results)))
				}
			}
		}
	}
	return problems, judged
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// callCounts are the plugin's PREPARE and UNPREPARE calls per claim
// (namespace/name) on one node.
type callCounts struct {
	prepares, unprepares map[string]int
	// prepared are the claims whose last call was a PREPARE: prepared
	// on the node now, as far as the plugin knows.
	prepared map[string]bool
}

// parsePluginLog counts the calls the test driver printed, one line per
// call: "PREPARE claims=ns/a,ns/b".
func parsePluginLog(log string) callCounts {
	c := callCounts{prepares: map[string]int{}, unprepares: map[string]int{}, prepared: map[string]bool{}}
	for line := range strings.SplitSeq(log, "\n") {
		for _, kind := range []struct {
			prefix  string
			counts  map[string]int
			prepare bool
		}{{"PREPARE claims=", c.prepares, true}, {"UNPREPARE claims=", c.unprepares, false}} {
			if rest, ok := strings.CutPrefix(line, kind.prefix); ok {
				for claim := range strings.SplitSeq(rest, ",") {
					if claim == "" {
						continue
					}
					kind.counts[claim]++
					if kind.prepare {
						c.prepared[claim] = true
					} else {
						delete(c.prepared, claim)
					}
				}
			}
		}
	}
	return c
}

// unprepareProblems (invariant 3, once every pod is gone): every claim
// prepared on a node is unprepared there, and exactly once, except that a
// node agent killed after the plugin unprepared and before it wrote its
// checkpoint asks again (a kubelet does the same; unprepare is
// idempotent): a kill interrupts at most inFlight unprepares (the agent's
// workers), so the node sees at most agentKills*inFlight repeats, and a
// claim at most one per kill. A claim unprepared that was never prepared
// there is a problem too. repeats counts the unprepares beyond the first.
func unprepareProblems(node string, calls callCounts, agentKills, inFlight int) (problems []string, repeats int) {
	for _, claim := range sortedNames(calls.prepares) {
		n := calls.unprepares[claim]
		switch {
		case n == 0:
			problems = append(problems, fmt.Sprintf("claim %s was prepared on %s (%d calls) and never unprepared", claim, node, calls.prepares[claim]))
		case n > 1+agentKills:
			problems = append(problems, fmt.Sprintf("claim %s was unprepared %d times on %s, whose agent was killed %d times", claim, n, node, agentKills))
		}
		if n > 1 {
			repeats += n - 1
		}
	}
	if repeats > agentKills*inFlight {
		problems = append(problems, fmt.Sprintf("%d claims unprepared again on %s, whose agent was killed %d times (at most %d unprepares in flight)", repeats, node, agentKills, inFlight))
	}
	for _, claim := range sortedNames(calls.unprepares) {
		if calls.prepares[claim] == 0 {
			problems = append(problems, fmt.Sprintf("claim %s was unprepared on %s and never prepared there", claim, node))
		}
	}
	return problems, repeats
}

// cdiSpecName is the file in which the test driver describes a claim's
// devices to the runtime.
func cdiSpecName(claim types.UID) string {
	return fmt.Sprintf("%s-%s.json", chaosPlugin, claim)
}

// missingCDISpecs (invariant 3, while running): a claim that the plugin
// prepared on the node and has not unprepared since has its CDI spec in
// the plugin's dir (files, by name). The claims give the UIDs; a claim
// that no longer exists is not judged. Keyed for a staleTracker: the
// driver writes the file before it prints PREPARE and removes it before
// UNPREPARE, so one listing may fall in between; a file missing for
// several rounds is not.
func missingCDISpecs(node string, prepared map[string]bool, claims []resourcev1.ResourceClaim, files map[string]bool) map[string]string {
	missing := map[string]string{}
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		if !prepared[key] {
			continue
		}
		if name := cdiSpecName(c.UID); !files[name] {
			missing["cdi/"+node+"/"+name] = fmt.Sprintf("claim %s is prepared on %s but its CDI spec %s is missing", key, node, name)
		}
	}
	return missing
}

// leftoverCDISpecs (invariant 3, once every claim was unprepared): every
// file left in a plugin's CDI dir describes devices of a claim that is no
// longer prepared.
func leftoverCDISpecs(node, dir string, files []string) []string {
	var problems []string
	for _, name := range files {
		problems = append(problems, fmt.Sprintf("CDI spec %s left behind on %s", filepath.Join(dir, name), node))
	}
	return problems
}

// staleTracker remembers since when a reference (a claim reserved for a
// pod, a nomination) has pointed at something that is gone.
type staleTracker struct {
	since    map[string]time.Time
	reported map[string]bool
}

func newStaleTracker() *staleTracker {
	return &staleTracker{since: map[string]time.Time{}, reported: map[string]bool{}}
}

// observe takes the keys that are stale in the snapshot taken at now and
// returns a problem for each that has been stale for longer than bound
// (once per key). A key not seen stale again is forgotten.
func (st *staleTracker) observe(now time.Time, stale map[string]string, bound time.Duration) []string {
	var problems []string
	for key := range st.since {
		if _, ok := stale[key]; !ok {
			delete(st.since, key)
		}
	}
	for _, key := range sortedNames(stale) {
		first, ok := st.since[key]
		if !ok {
			st.since[key] = now
			continue
		}
		if now.Sub(first) > bound && !st.reported[key] {
			st.reported[key] = true
			problems = append(problems, fmt.Sprintf("%s for %v (bound %v)", stale[key], now.Sub(first).Round(time.Second), bound))
		}
	}
	return problems
}

// staleReferences (invariant 4) are, in a snapshot, the claims reserved
// for a pod that does not exist (a preempted victim's claim not freed) and
// the nominations of a node that does not exist.
func staleReferences(s chaosSnapshot) map[string]string {
	stale := map[string]string{}
	uids := map[string]bool{}
	for _, p := range s.pods {
		uids[string(p.UID)] = true
		if node := p.Status.NominatedNodeName; node != "" && p.Spec.NodeName == "" && !s.nodes[node] {
			stale["nominated/"+string(p.UID)+"/"+node] = fmt.Sprintf("pod %s nominated to node %s, which does not exist,", p.Name, node)
		}
	}
	for _, c := range s.claims {
		for _, r := range c.Status.ReservedFor {
			if r.Resource == "pods" && !uids[string(r.UID)] {
				stale["reserved/"+c.Namespace+"/"+c.Name+"/"+string(r.UID)] = fmt.Sprintf("claim %s reserved for pod %s (%s), which is gone,", c.Name, r.Name, r.UID)
			}
		}
	}
	return stale
}

// settleProblems (invariants 4 and 6, on a snapshot after the faults and
// the workload stopped) say why the system has not settled: a pod neither
// Running nor Pending with a reason (preemptors included: they run or give
// up saying why), a claim reserved for a pod that is gone, an allocated
// claim that nobody uses.
func settleProblems(s chaosSnapshot) []string {
	var problems []string
	uids := map[string]bool{}
	for _, p := range s.pods {
		uids[string(p.UID)] = true
		if p.DeletionTimestamp != nil {
			problems = append(problems, fmt.Sprintf("pod %s is still being deleted", p.Name))
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
		case corev1.PodPending:
			if reason := pendingReason(p); reason == "" {
				problems = append(problems, fmt.Sprintf("pod %s (node %q) is Pending with no reason", p.Name, p.Spec.NodeName))
			}
		default:
			problems = append(problems, fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase))
		}
	}
	for _, c := range s.claims {
		pods := 0
		for _, r := range c.Status.ReservedFor {
			if r.Resource != "pods" {
				pods++ // a PodGroup: its members are checked as pods
				continue
			}
			pods++
			if !uids[string(r.UID)] {
				problems = append(problems, fmt.Sprintf("claim %s reserved for pod %s, which is gone", c.Name, r.Name))
			}
		}
		if c.Status.Allocation != nil && pods == 0 && c.DeletionTimestamp == nil {
			problems = append(problems, fmt.Sprintf("claim %s is allocated with no consumer", c.Name))
		}
	}
	return problems
}

// pendingReason is why an unbound pod waits: its PodScheduled=False
// condition's reason and message. A bound Pending pod has no reason to
// wait once the system settled.
func pendingReason(p corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}
