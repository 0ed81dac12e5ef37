package allocation

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/preemption"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

// The nominations of preemptors and the victim searches, the part of
// preemption (preempt.go) that is placement state: kube-scheduler's
// nominator and its PostFilter's search. The methods whose names end in
// Locked run under the placement state's mutex; the others take it.

// nomination is a preemptor waiting for its victims to go.
type nomination struct {
	podUID   types.UID
	key      string
	node     string
	priority int32
	// holds are the allocations the preemptor gets once the victims are
	// gone, recorded in the tracker's accounting under holdUID(i).
	holds []*resourceapi.AllocationResult
}

func holdUID(pod types.UID, i int) types.UID {
	return types.UID(fmt.Sprintf("nomination/%s/%d", pod, i))
}

// setHoldsLocked puts a nomination's holds into (or out of) the tracker's
// accounting. The state's mutex must be held.
func (s *placementState) setHoldsLocked(n *nomination, held bool) {
	t := s.tracker
	for i, alloc := range n.holds {
		uid := holdUID(n.podUID, i)
		old := t.inUse.Claim(uid)
		if held {
			t.inUse.SetClaim(uid, alloc)
		} else {
			t.inUse.SetClaim(uid, nil)
		}
		if t.state != nil {
			t.state.Refresh(t.inUse, old, alloc)
		}
	}
}

// releaseNominationsLocked takes the holds of the pod's own nomination and
// of those of lower priority out of the accounting for the decision about
// pod; the returned function puts them back, all but the pod's own when
// keepOwn is false (it was placed). The state's mutex must be held.
func (s *placementState) releaseNominationsLocked(pod *corev1.Pod) func(keepOwn bool) {
	if len(s.nominations) == 0 {
		return func(bool) {}
	}
	priority := podPriority(pod)
	var released []*nomination
	for uid, n := range s.nominations {
		if uid == pod.UID || n.priority < priority {
			s.setHoldsLocked(n, false)
			released = append(released, n)
		}
	}
	return func(keepOwn bool) {
		for _, n := range released {
			if n.podUID == pod.UID && !keepOwn {
				delete(s.nominations, n.podUID)
				s.preemptionInputs.Add(1)
				continue
			}
			if s.nominations[n.podUID] == n {
				s.setHoldsLocked(n, true)
			}
		}
	}
}

// nominate makes the pod's nomination n, with its holds in the
// accounting, in place of an earlier one.
func (s *placementState) nominate(n *nomination) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	s.nominateLocked(n)
}

func (s *placementState) nominateLocked(n *nomination) {
	if old, ok := s.nominations[n.podUID]; ok {
		s.setHoldsLocked(old, false)
	}
	s.nominations[n.podUID] = n
	s.preemptionInputs.Add(1)
	s.setHoldsLocked(n, true)
}

// dropNomination abandons the nomination of a pod that is gone or no
// longer pending: its holds are released; its last victim search is
// forgotten. It returns the nomination, nil when there was none.
func (s *placementState) dropNomination(uid types.UID) *nomination {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	delete(s.noPreemption, uid)
	n, ok := s.nominations[uid]
	if ok {
		s.setHoldsLocked(n, false)
		delete(s.nominations, uid)
		s.preemptionInputs.Add(1)
	}
	return n
}

// nominatedByKey is the UID of the nominated pod with that key, "" when
// there is none.
func (s *placementState) nominatedByKey(key string) types.UID {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	var uid types.UID
	for u, n := range s.nominations {
		if n.key == key {
			uid = u
		}
	}
	return uid
}

// nominationCount is how many pods hold a nomination, for logs and the
// nominations metric.
func (s *placementState) nominationCount() int {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	return len(s.nominations)
}

// considerPreemptionLocked looks for victims for a pod that fits on none of
// nodes and records the outcome in d. The state's mutex must be held.
func (s *placementState) considerPreemptionLocked(ctx context.Context, pod *corev1.Pod, toAllocate []*resourceapi.ResourceClaim, nodes []*corev1.Node, inv *allocator.Inventory, d *decision) error {
	// A search that found no victims is not repeated while nothing it
	// depends on changed: it holds the lock orders of magnitude longer
	// than placing a pod (BenchmarkDecidePreempting measures it).
	inputs := s.preemptionInputs.Load()
	if last, ok := s.noPreemption[pod.UID]; ok && last.inputs == inputs {
		d.preemption = &preemptionPlan{reason: last.reason}
		return nil
	}
	delete(s.noPreemption, pod.UID)
	cluster, err := s.preemptionClusterLocked(inv)
	if err != nil {
		return err
	}
	preemptor := &preemption.Preemptor{
		Priority:         podPriority(pod),
		PreemptionPolicy: pod.Spec.PreemptionPolicy,
		Members:          []preemption.Member{{Key: podKey(pod), Claims: toAllocate, Nodes: nodes}},
	}
	decision, err := preemption.Find(ctx, cluster, preemptor, preemption.Options{})
	if err != nil {
		return fmt.Errorf("preemption: %w", err)
	}
	if !decision.Possible {
		s.noPreemption[pod.UID] = noPreemption{inputs: inputs, reason: decision.Reason}
		d.preemption = &preemptionPlan{reason: decision.Reason}
		if n, ok := s.nominations[pod.UID]; ok {
			// Not possible any more (the victims' places were taken by
			// pods of higher priority): abandon it.
			s.setHoldsLocked(n, false)
			delete(s.nominations, pod.UID)
			s.preemptionInputs.Add(1)
		}
		return nil
	}
	placement := decision.Placement[0]
	d.preemption = &preemptionPlan{node: placement.Node, victims: decision.Victims, freedBy: decision.FreedBy, freed: decision.Freed}
	s.nominateLocked(&nomination{podUID: pod.UID, key: podKey(pod), node: placement.Node, priority: podPriority(pod), holds: placement.Allocations})
	klog.FromContext(ctx).V(2).Info("Preemption", "node", placement.Node, "victims", len(decision.Victims), "exact", decision.Exact, "attempts", decision.Attempts)
	return nil
}

// preemptionClusterLocked is the state victims are chosen from: the
// tracker's accounting, the allocated claims that pods consume, and the
// bound pods with claims.
func (s *placementState) preemptionClusterLocked(inv *allocator.Inventory) (*preemption.Cluster, error) {
	cluster := &preemption.Cluster{Allocator: s.allocator, Inventory: inv, InUse: s.tracker.inUseLocked()}
	for _, s := range s.slices {
		cluster.Slices = append(cluster.Slices, s.slice)
	}
	claims, err := s.claimLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list claims from cache: %w", err)
	}
	for _, claim := range claims {
		allocation := s.tracker.allocationLocked(claim.UID)
		if allocation == nil || len(claim.Status.ReservedFor) == 0 {
			continue
		}
		internal := &resourceapi.ResourceClaim{}
		if err := resourcev1.Convert_v1_ResourceClaim_To_resource_ResourceClaim(claim, internal, nil); err != nil {
			return nil, fmt.Errorf("convert claim %s: %w", klog.KObj(claim), err)
		}
		internal.Status.Allocation = allocation
		cluster.Claims = append(cluster.Claims, internal)
	}
	pods, err := s.podLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods from cache: %w", err)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || podclaims.IsDone(pod) || !podclaims.HasClaims(pod) {
			continue
		}
		cluster.Pods = append(cluster.Pods, preemption.Pod{
			UID: pod.UID, Key: podKey(pod), Priority: s.victimPriority(pod), Node: pod.Spec.NodeName,
			Terminating: pod.DeletionTimestamp != nil, Unit: s.disruptionUnit(pod),
		})
	}
	return cluster, nil
}

// victimPriority is the priority a running pod defends its devices with:
// a member of a PodGroup has the group's spec.priority when that is
// higher than its own, so that a gang whose pods have no class of their
// own is preempted by no pod the gang itself could preempt, and a later
// member never preempts an earlier one.
func (s *placementState) victimPriority(pod *corev1.Pod) int32 {
	priority := podPriority(pod)
	group := s.podGroupOf(pod)
	if group == nil || group.Spec.Priority == nil {
		return priority
	}
	return max(priority, *group.Spec.Priority)
}

// disruptionUnit is the unit a running pod is preempted with: the members
// of a PodGroup whose disruptionMode is all go all together or not at
// all. The unit is the group's UID, which is also the consumer UID of the
// claims reserved for the group, so that those are freed with it.
func (s *placementState) disruptionUnit(pod *corev1.Pod) string {
	group := s.podGroupOf(pod)
	if group == nil || group.Spec.DisruptionMode == nil || group.Spec.DisruptionMode.All == nil {
		return ""
	}
	return string(group.UID)
}

// podGroupOf returns the pod's PodGroup from the cache, or nil.
func (s *placementState) podGroupOf(pod *corev1.Pod) *schedulingv1beta1.PodGroup {
	name := podclaims.GroupOf(pod)
	if name == "" || s.podGroupLister == nil {
		return nil
	}
	group, err := s.podGroupLister.PodGroups(pod.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return group
}

// groupPriority is a gang's priority and preemption policy: the
// PodGroup's spec.priority and spec.preemptionPolicy when set (the
// Priority admission fills them from spec.priorityClassName), else the
// highest of its pending pods', with the policy of that pod.
func groupPriority(group *schedulingv1beta1.PodGroup, members []*gangMember) (int32, *corev1.PreemptionPolicy) {
	var priority int32
	var policy *corev1.PreemptionPolicy
	for i, m := range members {
		if p := podPriority(m.pod); i == 0 || p > priority {
			priority, policy = p, m.pod.Spec.PreemptionPolicy
		}
	}
	if group.Spec.Priority != nil {
		priority = *group.Spec.Priority
	}
	if group.Spec.PreemptionPolicy != nil {
		groupPolicy := corev1.PreemptionPolicy(*group.Spec.PreemptionPolicy)
		policy = &groupPolicy
	}
	return priority, policy
}

// releaseGangNominationsLocked is releaseNominationsLocked for every
// member of a gang.
func (s *placementState) releaseGangNominationsLocked(members []*gangMember) func() {
	restores := make([]func(bool), 0, len(members))
	for _, m := range members {
		restores = append(restores, s.releaseNominationsLocked(m.pod))
	}
	return func() {
		for i, restore := range restores {
			restore(members[i].d.node == "")
		}
	}
}

// considerGangPreemptionLocked looks for victims for a gang whose
// members fit nowhere together, or for the later members of a placed gang
// of which none fits (in the domain of those placed); each member placed in the plan gets its
// part of it (the victims with the first). The state's mutex must be held.
func (s *placementState) considerGangPreemptionLocked(ctx context.Context, group *schedulingv1beta1.PodGroup, members []*gangMember, req allocator.GangRequest, inv *allocator.Inventory) error {
	cluster, err := s.preemptionClusterLocked(inv)
	if err != nil {
		return err
	}
	if req.MinCount < 1 {
		// Later members of a placed gang: like single pods, the victims
		// make room for one at least.
		req.MinCount = 1
	}
	priority, policy := groupPriority(group, members)
	// The victims are chosen for a placement of the gang as PlaceGang
	// makes it: within one domain of the topology key, minCount members.
	preemptor := &preemption.Preemptor{Priority: priority, PreemptionPolicy: policy, Place: preemption.GangPlace(s.allocator, req)}
	for i, m := range members {
		preemptor.Members = append(preemptor.Members, preemption.Member{Key: podKey(m.pod), Claims: req.Members[i].Claims, Nodes: req.Members[i].Nodes})
	}
	decision, err := preemption.Find(ctx, cluster, preemptor, preemption.Options{})
	if err != nil {
		return fmt.Errorf("preemption: %w", err)
	}
	victimsPlanned := false
	for i, m := range members {
		if old, ok := s.nominations[m.pod.UID]; ok {
			s.setHoldsLocked(old, false)
			delete(s.nominations, m.pod.UID)
			s.preemptionInputs.Add(1)
		}
		if !decision.Possible {
			m.d.preemption = &preemptionPlan{reason: decision.Reason}
			continue
		}
		placement := decision.Placement[i]
		if placement.Node == "" {
			// Left out: minCount members are placed without it.
			continue
		}
		plan := &preemptionPlan{node: placement.Node, freedBy: decision.FreedBy, freed: decision.Freed}
		if !victimsPlanned {
			plan.victims, victimsPlanned = decision.Victims, true
		}
		m.d.preemption = plan
		n := &nomination{podUID: m.pod.UID, key: podKey(m.pod), node: placement.Node, priority: priority, holds: slices.DeleteFunc(slices.Clone(placement.Allocations), func(a *resourceapi.AllocationResult) bool { return a == nil })}
		s.nominations[m.pod.UID] = n
		s.preemptionInputs.Add(1)
		s.setHoldsLocked(n, true)
	}
	klog.FromContext(ctx).V(2).Info("Gang preemption", "possible", decision.Possible, "victims", len(decision.Victims), "attempts", decision.Attempts)
	return nil
}

// restoreNomination holds again, after a restart, what the pod nominated
// for node would get there (restoreNominations).
func (s *placementState) restoreNomination(ctx context.Context, pod *corev1.Pod, claims []*resourcev1.ResourceClaim, node *corev1.Node) error {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	toAllocate, _, err := s.podClaimsLocked(pod, claims, &decision{})
	if err != nil || len(toAllocate) == 0 {
		return nil
	}
	inv, err := s.currentInventoryLocked(klog.FromContext(ctx))
	if err != nil {
		return err
	}
	cluster, err := s.preemptionClusterLocked(inv)
	if err != nil {
		return err
	}
	// A gang member holds with its group's priority, as when nominated.
	priority := s.victimPriority(pod)
	preemptor := &preemption.Preemptor{
		Priority: priority,
		Members:  []preemption.Member{{Key: podKey(pod), Claims: toAllocate, Nodes: []*corev1.Node{node}}},
	}
	decision, err := preemption.Find(ctx, cluster, preemptor, preemption.Options{})
	if err != nil || !decision.Possible {
		return err
	}
	placement := decision.Placement[0]
	n := &nomination{podUID: pod.UID, key: podKey(pod), node: placement.Node, priority: priority, holds: slices.DeleteFunc(slices.Clone(placement.Allocations), func(a *resourceapi.AllocationResult) bool { return a == nil })}
	s.nominations[pod.UID] = n
	s.preemptionInputs.Add(1)
	s.setHoldsLocked(n, true)
	return nil
}

// noPreemption remembers a victim search that found none, with
// placementState.preemptionInputs as it was before the search.
type noPreemption struct {
	inputs int64
	reason string
}
