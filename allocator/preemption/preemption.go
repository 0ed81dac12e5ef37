// Package preemption chooses the pods to evict so that a pending pod, or a
// gang of pods, gets the devices of its ResourceClaims. Like package
// allocator, whose Allocate decides every fit, it is a pure library: the
// caller hands in the prepared inventory, the in-use accounting, the
// allocated claims with their consumers and the pods that may be evicted.
//
// The rules (issue "Priority and preemption for pods and pod groups with
// claims"):
//   - only pods of strictly lower priority than the preemptor are victims,
//     and a preemptor with preemptionPolicy Never has none;
//   - a claim's devices are freed only when every consumer of the claim is
//     a victim: a claim shared with a pod that stays, or reserved for a
//     consumer that is not an evictable pod (a PodGroup), frees nothing;
//   - admin-access allocations never make a device busy, so removing them
//     frees nothing either;
//   - the victims are the fewest pods whose removal makes the preemptor fit;
//     among equally few, the ones of lowest priority (see Better);
//   - when even every lower-priority pod gone would not make room, there
//     are no victims and Decision.Reason says why;
//   - pods of one disruption unit (Pod.Unit: a PodGroup whose
//     disruptionMode is all) are victims all together or not at all, and
//     a unit weighs as many pods as it has; a unit with a member that may
//     not be a victim is spared whole. A claim reserved for the unit
//     itself (a PodGroup consumer whose UID is the unit) is freed with it.
package preemption

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// maxReasons is how many nodes Decision.Reason explains, in name order.
const maxReasons = 3

// DefaultMaxAttempts bounds the allocator calls of one Find when
// Options.MaxAttempts is 0.
const DefaultMaxAttempts = 20000

// Pod is a running pod that may be evicted.
type Pod struct {
	UID types.UID
	// Key is namespace/name; it breaks ties and names the pod in reasons.
	Key      string
	Priority int32
	// Node the pod is bound to; only reported.
	Node string
	// Terminating pods (deletionTimestamp set, e.g. the victims of an
	// earlier preemption) count as gone whatever their priority: their
	// claims are released once every other consumer goes too, and they
	// are never victims. When they alone make room, Find returns no
	// victims: the preemptor waits for them.
	Terminating bool
	// Unit, when set, names the disruption unit of the pod: the pods of
	// one unit are evicted together or not at all (a PodGroup with
	// disruptionMode all; the unit is the PodGroup's UID, which is also
	// the consumer UID of the claims reserved for the group).
	Unit string
}

// Cluster is the state the victims are chosen from.
type Cluster struct {
	Allocator *allocator.Allocator
	Inventory *allocator.Inventory
	// InUse is the accounting of every allocation, recorded per claim UID
	// (InUse.AddClaim or SetClaim), as the allocation controller keeps it.
	// Find works on a clone.
	InUse *allocator.InUse
	// Claims are the allocated claims that pods consume. Their allocation
	// is the one InUse records under the claim's UID; their consumers are
	// status.reservedFor.
	Claims []*resourceapi.ResourceClaim
	// Pods are the pods that may be evicted, of every priority: Find
	// itself keeps the ones below the preemptor's. A consumer that is not
	// listed here is never evicted, so its claims are never freed.
	Pods []Pod
	// Slices tell from which nodes a device is usable; pods holding no
	// device usable from a node are not considered for it.
	Slices []*resourceapi.ResourceSlice
}

// Member is one pod of the preemptor: a pending pod alone, or one member
// of a gang.
type Member struct {
	// Key is namespace/name of the pod.
	Key string
	// Claims are the pod's claims that still need an allocation. A claim
	// must not be shared between members.
	Claims []*resourceapi.ResourceClaim
	// Nodes are the nodes the pod may run on (node selector, affinity,
	// taints already checked by the caller).
	Nodes []*corev1.Node
}

// Preemptor is a pending pod (one member) or a gang (several members that
// must all be placed at once).
type Preemptor struct {
	Priority int32
	// PreemptionPolicy nil means PreemptLowerPriority, as defaulted.
	PreemptionPolicy *corev1.PreemptionPolicy
	Members          []Member
	// Place, when set, places the members at once on st, whose
	// accounting is u (the victims' claims released in both), instead of
	// the built-in search, which places every member one by one over
	// their nodes, backtracking over nodes but not over the devices chosen
	// on a node. A gang's Place is allocator.PlaceGang, which keeps the
	// group's topology and needs only its minCount members. It returns
	// one result per member (an empty Node for a member left out), or nil
	// and a one-line reason. Each call counts as one attempt. st and u
	// must be neither changed nor kept.
	Place func(ctx context.Context, st *allocator.State, u *allocator.InUse) ([]allocator.Result, string, error)
}

// Options tune Find.
type Options struct {
	// MaxAttempts bounds the allocator calls (Allocate) of one Find;
	// DefaultMaxAttempts when 0. When the search for the fewest victims
	// runs out of it, the victims are still sufficient and inclusion
	// minimal (no single one could be spared), and Decision.Exact is
	// false.
	MaxAttempts int
}

// Decision is the outcome of Find.
type Decision struct {
	// Possible: evicting Victims (possibly none) makes the preemptor fit.
	// When false, Reason says why preemption does not help.
	Possible bool
	// Victims sorted by priority, then key.
	Victims []Pod
	// Placement has one result per member, in the order of the members:
	// the node and the allocations the members get once the victims are
	// gone. The caller nominates these nodes and allocates only after the
	// victims are gone (the allocation may then differ).
	Placement []allocator.Result
	// Freed are the devices the claims of the victims (and of the
	// terminating pods) release, admin access excluded, sorted.
	Freed []allocator.DeviceID
	// FreedBy are, per victim UID, the devices of its claims that are
	// released (a shared claim's devices are listed under each of its
	// consumers), for the events on each victim.
	FreedBy map[types.UID][]allocator.DeviceID
	// Exact: Victims are proven to be the best choice (Better). False when
	// the search ran out of Options.MaxAttempts.
	Exact bool
	// Reason says why there are no victims when Possible is false; for a
	// single pod, per node (the first nodes by name, then how many more).
	Reason string
	// Attempts is the number of allocator calls made.
	Attempts int
}

// Better reports whether victim set a is a better choice than b: fewer
// pods; among equally many, the lower priorities, compared from the
// highest down (the highest victim priority as low as possible, then the
// second highest, and so on, as upstream's scheduler first minimizes the
// highest victim priority); among equal priorities, the pods whose keys
// sort first, compared in the same order. The priorities are those of the
// pods; a and b must each be sorted by priority, then key.
func Better(a, b []Pod) bool { return compareSets(a, b) < 0 }

func compareSets(a, b []Pod) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	for i := len(a) - 1; i >= 0; i-- {
		if a[i].Priority != b[i].Priority {
			if a[i].Priority < b[i].Priority {
				return -1
			}
			return 1
		}
	}
	for i := len(a) - 1; i >= 0; i-- {
		if c := strings.Compare(a[i].Key, b[i].Key); c != 0 {
			return c
		}
	}
	return 0
}

// SortPods sorts pods by priority, then key: the order Decision.Victims
// and Better use.
func SortPods(pods []Pod) {
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Priority != pods[j].Priority {
			return pods[i].Priority < pods[j].Priority
		}
		return pods[i].Key < pods[j].Key
	})
}

// Find chooses the victims for the preemptor. A preemptor of one member is
// placed on one of its nodes: each node is searched with the pods holding
// devices usable from it, and the best node's victims win (ties go to the
// node whose name sorts first). A gang (or a preemptor with Place) is
// searched as a whole, with the pods holding devices usable from any of
// its members' nodes: for each victim set tried, its members are placed
// at once (Preemptor.Place, or one by one over their nodes, backtracking).
//
// The error is set only when the allocator could not run (cancelled
// context, too many claims).
func Find(ctx context.Context, cluster *Cluster, preemptor *Preemptor, opts Options) (Decision, error) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if preemptor.PreemptionPolicy != nil && *preemptor.PreemptionPolicy == corev1.PreemptNever {
		return Decision{Exact: true, Reason: "preemptionPolicy is Never"}, nil
	}
	if len(preemptor.Members) == 0 {
		return Decision{Exact: true, Reason: "no pods to place"}, nil
	}
	w := newWorld(cluster, preemptor, opts)
	if len(preemptor.Members) == 1 && preemptor.Place == nil {
		return w.findForPod(ctx)
	}
	return w.findForGang(ctx)
}

// world is one Find: the claims that victims could free, the candidates,
// and a working copy of the accounting whose freed claims it toggles.
type world struct {
	cluster   *Cluster
	preemptor *Preemptor
	budget    int
	attempts  int

	// lower are the pods below the preemptor's priority, by UID, and the
	// terminating pods.
	lower map[types.UID]*Pod
	// terminating pods are gone in every victim set.
	terminating []Pod
	// freeable claims: every consumer is a lower-priority pod, and the
	// allocation holds at least one device without admin access.
	freeable []freeableClaim
	// claimsByPod: indexes into freeable.
	claimsByPod map[types.UID][]int
	reach       reachability

	inUse *allocator.InUse
	state *allocator.State
	// freed[i]: freeable[i] is currently released in inUse and state.
	freed []bool
	// gone are the pods whose claims are currently released (the last
	// victims and the terminating pods).
	gone map[types.UID]bool
	// members' allocations currently added (gang search).
	placed map[types.UID]*resourceapi.AllocationResult

	// units are the disruption units that may be victims, with their
	// members (not terminating) sorted by key; unitRep stands for a unit
	// among the candidates: its first member, with the unit's highest
	// priority.
	units   map[string][]Pod
	unitRep map[string]Pod
}

type freeableClaim struct {
	uid        types.UID
	allocation *resourceapi.AllocationResult
	consumers  []types.UID
	devices    []allocator.DeviceID
}

func newWorld(cluster *Cluster, preemptor *Preemptor, opts Options) *world {
	w := &world{
		cluster:     cluster,
		preemptor:   preemptor,
		budget:      opts.MaxAttempts,
		lower:       map[types.UID]*Pod{},
		claimsByPod: map[types.UID][]int{},
		reach:       newReachability(cluster.Slices),
		inUse:       cluster.InUse.Clone(),
		placed:      map[types.UID]*resourceapi.AllocationResult{},
	}
	for i := range cluster.Pods {
		if p := &cluster.Pods[i]; p.Terminating || p.Priority < preemptor.Priority {
			w.lower[p.UID] = p
		}
		if p := &cluster.Pods[i]; p.Terminating {
			w.terminating = append(w.terminating, *p)
		}
	}
	w.collectUnits()
	for _, claim := range cluster.Claims {
		allocation := cluster.InUse.Claim(claim.UID)
		if allocation == nil || len(claim.Status.ReservedFor) == 0 {
			continue
		}
		fc := freeableClaim{uid: claim.UID, allocation: allocation}
		for _, consumer := range claim.Status.ReservedFor {
			fc.consumers = append(fc.consumers, consumer.UID)
		}
		if !slices.ContainsFunc(fc.consumers, func(uid types.UID) bool { return w.lower[uid] == nil && w.units[string(uid)] == nil }) {
			fc.devices = busyDevices(allocation)
		}
		if len(fc.devices) == 0 {
			continue
		}
		for _, uid := range fc.consumers {
			w.claimsByPod[uid] = append(w.claimsByPod[uid], len(w.freeable))
		}
		w.freeable = append(w.freeable, fc)
	}
	w.freed = make([]bool, len(w.freeable))
	w.state = cluster.Inventory.State(w.inUse)
	return w
}

// collectUnits finds the disruption units among the pods. A unit with a
// member that may not be a victim (of the preemptor's priority or above)
// is spared whole: none of its members is a victim.
func (w *world) collectUnits() {
	members := map[string][]Pod{}
	for _, p := range w.cluster.Pods {
		if p.Unit != "" && !p.Terminating {
			members[p.Unit] = append(members[p.Unit], p)
		}
	}
	if len(members) == 0 {
		return
	}
	w.units, w.unitRep = map[string][]Pod{}, map[string]Pod{}
	for unit, pods := range members {
		if slices.ContainsFunc(pods, func(p Pod) bool { return w.lower[p.UID] == nil }) {
			for _, p := range pods {
				delete(w.lower, p.UID)
			}
			continue
		}
		sort.Slice(pods, func(i, j int) bool { return pods[i].Key < pods[j].Key })
		rep := pods[0]
		for _, p := range pods {
			rep.Priority = max(rep.Priority, p.Priority)
		}
		w.units[unit], w.unitRep[unit] = pods, rep
	}
}

// candidate returns the candidate that stands for a consumer UID: the pod
// itself, or its unit's representative (also for the unit's own UID), or
// nil when the consumer cannot be a victim.
func (w *world) candidate(uid types.UID) *Pod {
	if pod := w.lower[uid]; pod != nil {
		if pod.Terminating {
			return nil
		}
		if rep, ok := w.unitRep[pod.Unit]; ok && pod.Unit != "" {
			return &rep
		}
		return pod
	}
	if rep, ok := w.unitRep[string(uid)]; ok {
		return &rep
	}
	return nil
}

// expand replaces the representatives of units in a victim set with all
// their members; the result is sorted by priority, then key. Expanding an
// expanded set changes nothing.
func (w *world) expand(set []Pod) []Pod {
	if len(w.units) == 0 {
		return set
	}
	seen := make(map[types.UID]bool, len(set))
	var out []Pod
	for _, p := range set {
		members, ok := w.units[p.Unit]
		if p.Unit == "" || !ok {
			members = []Pod{p}
		}
		for _, m := range members {
			if !seen[m.UID] {
				seen[m.UID] = true
				out = append(out, m)
			}
		}
	}
	SortPods(out)
	return out
}

// busyDevices are the devices an allocation holds; admin access holds
// none.
func busyDevices(allocation *resourceapi.AllocationResult) []allocator.DeviceID {
	var ids []allocator.DeviceID
	for _, r := range allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		ids = append(ids, allocator.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
	}
	return ids
}

// candidatesByNode are, per node, the lower-priority pods that consume a
// freeable claim holding a device usable from the node, sorted by
// priority, then key. One pass over the pods' devices.
func (w *world) candidatesByNode(nodes []*corev1.Node) map[string][]Pod {
	byNode := make(map[string][]Pod, len(nodes))
	names := sets.New[string]()
	for _, node := range nodes {
		names.Insert(node.Name)
	}
	added := map[string]sets.Set[types.UID]{}
	for uid, indexes := range w.claimsByPod {
		pod := w.candidate(uid)
		if pod == nil {
			continue
		}
		usable := map[string]bool{}
		for _, i := range indexes {
			for _, id := range w.freeable[i].devices {
				w.reach.addUsableNodes(id, nodes, usable)
			}
		}
		for name := range usable {
			if !names.Has(name) {
				continue
			}
			// A unit's members all stand for its representative.
			if added[name] == nil {
				added[name] = sets.New[types.UID]()
			}
			if !added[name].Has(pod.UID) {
				added[name].Insert(pod.UID)
				byNode[name] = append(byNode[name], *pod)
			}
		}
	}
	for _, pods := range byNode {
		SortPods(pods)
	}
	return byNode
}

// candidates are the pods of candidatesByNode of any of the nodes.
func (w *world) candidates(nodes []*corev1.Node) []Pod {
	seen := map[types.UID]bool{}
	var pods []Pod
	for _, byNode := range w.candidatesByNode(nodes) {
		for _, pod := range byNode {
			if !seen[pod.UID] {
				seen[pod.UID] = true
				pods = append(pods, pod)
			}
		}
	}
	SortPods(pods)
	return pods
}

// setVictims releases the claims every consumer of which is a victim and
// restores the others.
//
// Only the claims of pods that joined or left the victims since the last
// call are looked at: a search tries thousands of sets in a large cluster.
func (w *world) setVictims(victims []Pod) {
	victims = w.expand(victims)
	gone := make(map[types.UID]bool, len(victims)+len(w.terminating))
	for _, v := range append(slices.Clip(victims), w.terminating...) {
		gone[v.UID] = true
		if _, ok := w.units[v.Unit]; ok && v.Unit != "" {
			// The whole unit is gone: so is its own consumer.
			gone[types.UID(v.Unit)] = true
		}
	}
	var changed []int
	for uid := range gone {
		if !w.gone[uid] {
			changed = append(changed, w.claimsByPod[uid]...)
		}
	}
	for uid := range w.gone {
		if !gone[uid] {
			changed = append(changed, w.claimsByPod[uid]...)
		}
	}
	w.gone = gone
	for _, i := range changed {
		fc := &w.freeable[i]
		free := !slices.ContainsFunc(fc.consumers, func(uid types.UID) bool { return !gone[uid] })
		if free == w.freed[i] {
			continue
		}
		w.freed[i] = free
		if free {
			w.inUse.SetClaim(fc.uid, nil)
		} else {
			w.inUse.SetClaim(fc.uid, fc.allocation)
		}
		w.state.Refresh(w.inUse, fc.allocation)
	}
}

// freedDevices are the devices released with the victims gone, in all
// and per victim.
func (w *world) freedDevices(victims []Pod) ([]allocator.DeviceID, map[types.UID][]allocator.DeviceID) {
	w.setVictims(victims)
	var all []allocator.DeviceID
	for i, free := range w.freed {
		if free {
			all = append(all, w.freeable[i].devices...)
		}
	}
	by := make(map[types.UID][]allocator.DeviceID, len(victims))
	for _, v := range victims {
		var ids []allocator.DeviceID
		for _, i := range w.claimsByPod[v.UID] {
			if w.freed[i] {
				ids = append(ids, w.freeable[i].devices...)
			}
		}
		by[v.UID] = sortedDevices(ids)
	}
	return sortedDevices(all), by
}

func sortedDevices(ids []allocator.DeviceID) []allocator.DeviceID {
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	return slices.Compact(ids)
}

var errBudget = fmt.Errorf("out of attempts")

func (w *world) allocate(ctx context.Context, claims []*resourceapi.ResourceClaim, node *corev1.Node) (allocator.Result, error) {
	if w.attempts >= w.budget {
		return allocator.Result{}, errBudget
	}
	w.attempts++
	return w.cluster.Allocator.Allocate(ctx, w.state, claims, node)
}

// fitFunc places the preemptor with the victims gone: the placement when
// it fits, else nil and a one-line reason.
type fitFunc func(ctx context.Context, victims []Pod) ([]allocator.Result, string, error)

func (w *world) findForPod(ctx context.Context) (Decision, error) {
	member := &w.preemptor.Members[0]
	nodes := slices.Clone(member.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	candidates := w.candidatesByNode(nodes)
	var best *Decision
	var reasons []string
	exact := true
	for _, node := range nodes {
		fit := func(ctx context.Context, victims []Pod) ([]allocator.Result, string, error) {
			w.setVictims(victims)
			r, err := w.allocate(ctx, member.Claims, node)
			if err != nil || !r.Fits() {
				summary := ""
				if r.Explanation != nil {
					summary = r.Explanation.Summary()
				}
				return nil, summary, err
			}
			return []allocator.Result{r}, "", nil
		}
		limit := -1
		if best != nil {
			limit = len(best.Victims)
		}
		d, err := w.search(ctx, candidates[node.Name], fit, limit)
		if err == errBudget {
			exact = false
			break
		}
		if err != nil {
			return Decision{}, err
		}
		exact = exact && d.Exact
		if !d.Possible {
			// Without a reason, the node needs more victims than the best.
			if d.Reason != "" {
				reasons = append(reasons, node.Name+": "+d.Reason)
			}
			continue
		}
		if best == nil || compareSets(d.Victims, best.Victims) < 0 {
			best = &d
		}
		if len(best.Victims) == 0 {
			break
		}
	}
	if best == nil {
		reason := "no nodes to place the pod on"
		if len(reasons) > maxReasons {
			reasons = append(reasons[:maxReasons], fmt.Sprintf("%d more nodes", len(reasons)-maxReasons))
		}
		if len(reasons) > 0 {
			reason = strings.Join(reasons, "; ")
		}
		if !exact {
			reason = "out of attempts before finding victims; " + reason
		}
		return Decision{Exact: exact, Reason: reason, Attempts: w.attempts}, nil
	}
	best.Exact = exact
	best.Freed, best.FreedBy = w.freedDevices(best.Victims)
	best.Attempts = w.attempts
	return *best, nil
}

// search finds the best victim set among the candidates for one fit
// function. With limit >= 0, sets of more than limit victims are not of
// interest (another node needs no more); the result is then not Possible
// with an empty Reason when no set of at most limit victims fits.
//
// Fitting is monotone: releasing more devices never makes an allocation
// fail. Dropping victims from all candidates, the highest priorities
// first, gives a first solution (what upstream's scheduler does); the
// pods without which even all others gone do not suffice are in every
// solution (forced); and the fewest victims are then found by trying
// every set of each size from the forced ones up, the sets being
// compared by Better, until a size has a solution.
func (w *world) search(ctx context.Context, cands []Pod, fit fitFunc, limit int) (Decision, error) {
	placement, reason, err := fit(ctx, nil)
	if err != nil {
		return Decision{}, err
	}
	if placement != nil {
		return Decision{Possible: true, Exact: true, Placement: placement}, nil
	}
	if len(cands) == 0 {
		return Decision{Exact: true, Reason: "no lower-priority pod holds devices usable here: " + reason}, nil
	}
	placement, reason, err = fit(ctx, cands)
	if err != nil {
		return Decision{}, err
	}
	if placement == nil {
		return Decision{Exact: true, Reason: fmt.Sprintf("does not fit even with all %d lower-priority pods gone that hold devices usable here: %s", len(cands), reason)}, nil
	}

	// A first solution: spare the highest priorities first, as upstream's
	// scheduler does. Every later phase only improves on it, so running
	// out of attempts from here on still leaves victims that suffice.
	victims := slices.Clone(cands)
	for i := len(cands) - 1; i >= 0; i-- {
		without := slices.DeleteFunc(slices.Clone(victims), func(p Pod) bool { return p.UID == cands[i].UID })
		p, _, err := fit(ctx, without)
		if err != nil {
			return Decision{}, err
		}
		if p != nil {
			victims, placement = without, p
		}
	}
	best := Decision{Possible: true, Victims: victims, Placement: placement}
	outOfAttempts := func(err error) (Decision, error) {
		if err != errBudget {
			return Decision{}, err
		}
		best.Victims = w.expand(best.Victims)
		if limit >= 0 && len(best.Victims) > limit {
			return Decision{}, err
		}
		return best, nil
	}
	// A unit weighs as many pods as it has: with units among the
	// candidates, fewer candidates are not always fewer pods.
	hasUnits := slices.ContainsFunc(cands, func(p Pod) bool { return w.units[p.Unit] != nil })
	if len(w.expand(best.Victims)) <= 1 {
		// None, or one of the lowest priority that suffices alone (the
		// first tried).
		return w.finish(best, limit), nil
	}

	forcedPods, optional, err := splitForced(ctx, cands, fit)
	if err != nil {
		return outOfAttempts(err)
	}
	if len(forcedPods) == len(best.Victims) {
		return w.finish(best, limit), nil
	}

	// Every set of the optional pods, fewest first. With units, a set of
	// more candidates than the best may still be fewer pods, up to as
	// many candidates as the best has pods.
	maxSize := len(best.Victims)
	if hasUnits {
		maxSize = min(len(cands), len(w.expand(best.Victims)))
	}
	maxSize = limitedSize(maxSize, limit)
	for size := len(forcedPods); size <= maxSize; size++ {
		found := false
		err := combinations(len(optional), size-len(forcedPods), func(chosen []int) error {
			set := slices.Clone(forcedPods)
			for _, i := range chosen {
				set = append(set, optional[i])
			}
			SortPods(set)
			if compareSets(w.expand(set), w.expand(best.Victims)) >= 0 {
				return nil
			}
			p, _, err := fit(ctx, set)
			if err != nil {
				return err
			}
			if p != nil {
				found = true
				best.Victims, best.Placement = set, p
			}
			return nil
		})
		if err != nil {
			return outOfAttempts(err)
		}
		if found && !hasUnits {
			break
		}
	}
	return w.finish(best, limit), nil
}

// limitedSize is size, or limit when that is set (>= 0) and lower.
func limitedSize(size, limit int) int {
	if limit >= 0 {
		return min(size, limit)
	}
	return size
}

// splitForced splits the candidates into those every solution needs (the
// preemptor does not fit with all others gone) and the others.
func splitForced(ctx context.Context, cands []Pod, fit fitFunc) (forced, optional []Pod, err error) {
	for i := range cands {
		rest := slices.Delete(slices.Clone(cands), i, i+1)
		p, _, err := fit(ctx, rest)
		if err != nil {
			return nil, nil, err
		}
		if p == nil {
			forced = append(forced, cands[i])
		} else {
			optional = append(optional, cands[i])
		}
	}
	return forced, optional, nil
}

// finish marks a completed search exact, with the units among the
// victims expanded to their members; a solution of more victims than
// limit is of no interest.
func (w *world) finish(best Decision, limit int) Decision {
	best.Victims = w.expand(best.Victims)
	if limit >= 0 && len(best.Victims) > limit {
		return Decision{Exact: true}
	}
	best.Exact = true
	return best
}

// combinations calls f with every k-subset of 0..n-1, as sorted indexes,
// the sets with the lowest largest index first (so, with candidates
// sorted by priority, those of lower priorities tend to come first).
func combinations(n, k int, f func([]int) error) error {
	if k > n || k < 0 {
		return nil
	}
	chosen := make([]int, k)
	// Fill position pos (from the top) with indexes below bound.
	var rec func(pos, bound int) error
	rec = func(pos, bound int) error {
		if pos < 0 {
			return f(chosen)
		}
		for i := pos; i < bound; i++ {
			chosen[pos] = i
			if err := rec(pos-1, i); err != nil {
				return err
			}
		}
		return nil
	}
	return rec(k-1, n)
}
