package allocation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/preemption"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/podclaims"
)

// Preemption: a pending pod that fits nowhere may evict pods of lower
// priority (package allocator/preemption chooses them). The preemptor is
// nominated for the node it gets once the victims are gone: the devices it
// will get there are held for it in the tracker's accounting, so that no
// pod of lower or equal priority takes them meanwhile, and its
// status.nominatedNodeName says so. The victims get the DisruptionTarget
// condition and are evicted through the Eviction API; the preemptor's
// claims are allocated only when it fits, that is once the victims'
// claims are released. A nomination ends when the preemptor is placed
// (on that node or another) or deleted.

const (
	// ReasonPreempted is the event on a victim, as upstream's scheduler.
	ReasonPreempted = "Preempted"
	// ReasonPreempting is the event on the preemptor, one per victim.
	ReasonPreempting = "Preempting"
	// ReasonPreemptionFailed: an eviction was refused (a disruption
	// budget in aggregated mode).
	ReasonPreemptionFailed = "PreemptionFailed"
	// ReasonPreemptionByScheduler is the DisruptionTarget reason on a
	// victim, as upstream's.
	ReasonPreemptionByScheduler = "PreemptionByScheduler"

	// nominationFieldManager owns status.nominatedNodeName and the
	// DisruptionTarget conditions, apart from what FieldManager owns, so
	// that applying one does not drop the other.
	nominationFieldManager = FieldManager + "-preemption"
)

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

// preemptionPlan is what considerPreemptionLocked decided for a pod that
// fits nowhere.
type preemptionPlan struct {
	// reason says why preemption does not help ("" when it does).
	reason string
	// node is the nominated node; victims may be empty when the pod
	// waits for pods that are terminating already.
	node    string
	victims []preemption.Pod
	freedBy map[types.UID][]allocator.DeviceID
	freed   []allocator.DeviceID
}

func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// setHoldsLocked puts a nomination's holds into (or out of) the tracker's
// accounting. The tracker's mutex must be held.
func (c *Controller) setHoldsLocked(n *nomination, held bool) {
	t := c.tracker
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
// keepOwn is false (it was placed). The tracker's mutex must be held.
func (c *Controller) releaseNominationsLocked(pod *corev1.Pod) func(keepOwn bool) {
	if len(c.nominations) == 0 {
		return func(bool) {}
	}
	priority := podPriority(pod)
	var released []*nomination
	for uid, n := range c.nominations {
		if uid == pod.UID || n.priority < priority {
			c.setHoldsLocked(n, false)
			released = append(released, n)
		}
	}
	return func(keepOwn bool) {
		for _, n := range released {
			if n.podUID == pod.UID && !keepOwn {
				delete(c.nominations, n.podUID)
				c.preemptionInputs.Add(1)
				continue
			}
			if c.nominations[n.podUID] == n {
				c.setHoldsLocked(n, true)
			}
		}
	}
}

// dropNomination abandons the nomination of a pod that is gone or no
// longer pending: its holds are released, nothing more is evicted; its
// last victim search is forgotten.
func (c *Controller) dropNomination(logger klog.Logger, uid types.UID) {
	t := c.tracker
	t.mutex.Lock()
	delete(c.noPreemption, uid)
	n, ok := c.nominations[uid]
	if ok {
		c.setHoldsLocked(n, false)
		delete(c.nominations, uid)
		c.preemptionInputs.Add(1)
	}
	t.mutex.Unlock()
	if !ok {
		return
	}
	logger.V(2).Info("Abandoned preemption", "pod", n.key, "node", n.node)
	// Other pods may fit in what it held.
	c.requeueUnschedulable(logger, "preemption abandoned", klog.KRef("", n.key), n.key)
}

// dropNominationByKey abandons the nomination of a pod known by key only
// (deleted).
func (c *Controller) dropNominationByKey(logger klog.Logger, key string) {
	c.tracker.mutex.Lock()
	var uid types.UID
	for u, n := range c.nominations {
		if n.key == key {
			uid = u
		}
	}
	c.tracker.mutex.Unlock()
	if uid != "" {
		c.dropNomination(logger, uid)
	}
}

// considerPreemptionLocked looks for victims for a pod that fits on none of
// nodes and records the outcome in d. The tracker's mutex must be held.
func (c *Controller) considerPreemptionLocked(ctx context.Context, pod *corev1.Pod, toAllocate []*resourceapi.ResourceClaim, nodes []*corev1.Node, inv *allocator.Inventory, d *decision) error {
	// A search that found no victims is not repeated while nothing it
	// depends on changed: it holds the lock orders of magnitude longer
	// than placing a pod (BenchmarkDecidePreempting measures it).
	inputs := c.preemptionInputs.Load()
	if last, ok := c.noPreemption[pod.UID]; ok && last.inputs == inputs {
		d.preemption = &preemptionPlan{reason: last.reason}
		return nil
	}
	delete(c.noPreemption, pod.UID)
	cluster, err := c.preemptionClusterLocked(inv)
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
		c.noPreemption[pod.UID] = noPreemption{inputs: inputs, reason: decision.Reason}
		d.preemption = &preemptionPlan{reason: decision.Reason}
		if n, ok := c.nominations[pod.UID]; ok {
			// Not possible any more (the victims' places were taken by
			// pods of higher priority): abandon it.
			c.setHoldsLocked(n, false)
			delete(c.nominations, pod.UID)
			c.preemptionInputs.Add(1)
		}
		return nil
	}
	placement := decision.Placement[0]
	d.preemption = &preemptionPlan{node: placement.Node, victims: decision.Victims, freedBy: decision.FreedBy, freed: decision.Freed}
	n := &nomination{podUID: pod.UID, key: podKey(pod), node: placement.Node, priority: podPriority(pod), holds: placement.Allocations}
	if old, ok := c.nominations[pod.UID]; ok {
		c.setHoldsLocked(old, false)
	}
	c.nominations[pod.UID] = n
	c.preemptionInputs.Add(1)
	c.setHoldsLocked(n, true)
	klog.FromContext(ctx).V(2).Info("Preemption", "node", placement.Node, "victims", len(decision.Victims), "exact", decision.Exact, "attempts", decision.Attempts)
	return nil
}

// preemptionClusterLocked is the state victims are chosen from: the
// tracker's accounting, the allocated claims that pods consume, and the
// bound pods with claims.
func (c *Controller) preemptionClusterLocked(inv *allocator.Inventory) (*preemption.Cluster, error) {
	cluster := &preemption.Cluster{Allocator: c.allocator, Inventory: inv, InUse: c.tracker.inUseLocked()}
	for _, s := range c.slices {
		cluster.Slices = append(cluster.Slices, s.slice)
	}
	claims, err := c.claimLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list claims from cache: %w", err)
	}
	for _, claim := range claims {
		allocation := c.tracker.allocationLocked(claim.UID)
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
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pods from cache: %w", err)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || podclaims.IsDone(pod) || !podclaims.HasClaims(pod) {
			continue
		}
		cluster.Pods = append(cluster.Pods, preemption.Pod{
			UID: pod.UID, Key: podKey(pod), Priority: c.victimPriority(pod), Node: pod.Spec.NodeName,
			Terminating: pod.DeletionTimestamp != nil, Unit: c.disruptionUnit(pod),
		})
	}
	return cluster, nil
}

// victimPriority is the priority a running pod defends its devices with:
// a member of a PodGroup has the group's spec.priority when that is
// higher than its own, so that a gang whose pods have no class of their
// own is preempted by no pod the gang itself could preempt, and a later
// member never preempts an earlier one.
func (c *Controller) victimPriority(pod *corev1.Pod) int32 {
	priority := podPriority(pod)
	group := c.podGroupOf(pod)
	if group == nil || group.Spec.Priority == nil {
		return priority
	}
	return max(priority, *group.Spec.Priority)
}

// disruptionUnit is the unit a running pod is preempted with: the members
// of a PodGroup whose disruptionMode is all go all together or not at
// all. The unit is the group's UID, which is also the consumer UID of the
// claims reserved for the group, so that those are freed with it.
func (c *Controller) disruptionUnit(pod *corev1.Pod) string {
	group := c.podGroupOf(pod)
	if group == nil || group.Spec.DisruptionMode == nil || group.Spec.DisruptionMode.All == nil {
		return ""
	}
	return string(group.UID)
}

// podGroupOf returns the pod's PodGroup from the cache, or nil.
func (c *Controller) podGroupOf(pod *corev1.Pod) *schedulingv1beta1.PodGroup {
	name := podclaims.GroupOf(pod)
	if name == "" || c.podGroupLister == nil {
		return nil
	}
	group, err := c.podGroupLister.PodGroups(pod.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return group
}

// preemptionSummary is what the pod's condition and event add about
// preemption.
func (p *preemptionPlan) summary() string {
	switch {
	case p.reason != "":
		return "preemption does not help: " + p.reason
	case len(p.victims) == 0:
		return fmt.Sprintf("nominated for node %s, waiting for preempted pods to terminate", p.node)
	}
	keys := make([]string, 0, len(p.victims))
	for _, v := range p.victims {
		keys = append(keys, v.Key)
	}
	return fmt.Sprintf("nominated for node %s, preempting %s", p.node, strings.Join(keys, ", "))
}

// preempt carries out a plan: nominate the preemptor, mark and evict the
// victims. It makes API calls and runs without the tracker's mutex.
func (c *Controller) preempt(ctx context.Context, pod *corev1.Pod, p *preemptionPlan) error {
	logger := klog.FromContext(ctx)
	if p.reason != "" {
		return c.setNominatedNode(ctx, pod, "")
	}
	if err := c.setNominatedNode(ctx, pod, p.node); err != nil {
		return err
	}
	for _, v := range p.victims {
		namespace, name, _ := strings.Cut(v.Key, "/")
		victim, err := c.podLister.Pods(namespace).Get(name)
		if apierrors.IsNotFound(err) || (err == nil && victim.UID != v.UID) {
			continue
		}
		if err != nil {
			return err
		}
		devices := deviceNames(p.freedBy[v.UID])
		message := fmt.Sprintf("%s: preempting to accommodate a higher priority pod", ControllerName)
		condition := corev1apply.PodCondition().
			WithType(corev1.DisruptionTarget).
			WithStatus(corev1.ConditionTrue).
			WithReason(ReasonPreemptionByScheduler).
			WithMessage(message).
			WithLastTransitionTime(metav1.Now())
		apply := corev1apply.Pod(victim.Name, victim.Namespace).WithUID(victim.UID).WithStatus(corev1apply.PodStatus().WithConditions(condition))
		if _, err := c.kubeClient.CoreV1().Pods(victim.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: nominationFieldManager, Force: true}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue
			}
			return fmt.Errorf("add condition %s to pod %s: %w", corev1.DisruptionTarget, v.Key, err)
		}
		eviction := &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: victim.Name, Namespace: victim.Namespace},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(victim.UID))},
		}
		err = c.kubeClient.PolicyV1().Evictions(victim.Namespace).Evict(ctx, eviction)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			continue
		case apierrors.IsTooManyRequests(err):
			// A disruption budget refuses it for now.
			c.eventf(pod, corev1.EventTypeWarning, ReasonPreemptionFailed, "Evicting pod %s on node %s: %v", v.Key, v.Node, err)
			return fmt.Errorf("evict pod %s: %w", v.Key, err)
		case err != nil:
			return fmt.Errorf("evict pod %s: %w", v.Key, err)
		}
		c.eventf(victim, corev1.EventTypeNormal, ReasonPreempted, "Preempted by pod %s (priority %d) on node %s, releasing devices %s", podKey(pod), podPriority(pod), v.Node, devices)
		c.eventf(pod, corev1.EventTypeNormal, ReasonPreempting, "Preempting pod %s (priority %d) on node %s, releasing devices %s", v.Key, v.Priority, v.Node, devices)
		logger.V(2).Info("Preempted pod", "victim", v.Key, "node", v.Node, "devices", devices)
	}
	return nil
}

func deviceNames(ids []allocator.DeviceID) string {
	if len(ids) == 0 {
		return "(none)"
	}
	names := make([]string, 0, len(ids))
	for _, id := range ids {
		names = append(names, id.String())
	}
	return strings.Join(names, ", ")
}

// setNominatedNode records (or, with "", clears) status.nominatedNodeName
// unless the pod says so already.
func (c *Controller) setNominatedNode(ctx context.Context, pod *corev1.Pod, node string) error {
	if pod.Status.NominatedNodeName == node {
		return nil
	}
	status := corev1apply.PodStatus()
	if node != "" {
		status = status.WithNominatedNodeName(node)
	}
	apply := corev1apply.Pod(pod.Name, pod.Namespace).WithUID(pod.UID).WithStatus(status)
	if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: nominationFieldManager, Force: true}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("set nominatedNodeName of pod %s: %w", klog.KObj(pod), err)
	}
	return nil
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
func (c *Controller) releaseGangNominationsLocked(members []*gangMember) func() {
	restores := make([]func(bool), 0, len(members))
	for _, m := range members {
		restores = append(restores, c.releaseNominationsLocked(m.pod))
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
// part of it (the victims with the first). The tracker's mutex must be held.
func (c *Controller) considerGangPreemptionLocked(ctx context.Context, group *schedulingv1beta1.PodGroup, members []*gangMember, req allocator.GangRequest, inv *allocator.Inventory) error {
	cluster, err := c.preemptionClusterLocked(inv)
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
	preemptor := &preemption.Preemptor{Priority: priority, PreemptionPolicy: policy, Place: preemption.GangPlace(c.allocator, req)}
	for i, m := range members {
		preemptor.Members = append(preemptor.Members, preemption.Member{Key: podKey(m.pod), Claims: req.Members[i].Claims, Nodes: req.Members[i].Nodes})
	}
	decision, err := preemption.Find(ctx, cluster, preemptor, preemption.Options{})
	if err != nil {
		return fmt.Errorf("preemption: %w", err)
	}
	victimsPlanned := false
	for i, m := range members {
		if old, ok := c.nominations[m.pod.UID]; ok {
			c.setHoldsLocked(old, false)
			delete(c.nominations, m.pod.UID)
			c.preemptionInputs.Add(1)
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
		c.nominations[m.pod.UID] = n
		c.preemptionInputs.Add(1)
		c.setHoldsLocked(n, true)
	}
	klog.FromContext(ctx).V(2).Info("Gang preemption", "possible", decision.Possible, "victims", len(decision.Victims), "attempts", decision.Attempts)
	return nil
}

// preemptLaterMembers carries out the plans of a placed gang's later
// members and adds what it did to reason.
func (c *Controller) preemptLaterMembers(ctx context.Context, members []*gangMember, reason string) (string, error) {
	summary, err := c.preemptGang(ctx, members)
	if err != nil || summary == "" {
		return reason, err
	}
	return reason + "; " + summary, nil
}

// preemptGang carries out the members' plans and says what the group's
// condition adds about preemption ("" when there was no plan).
func (c *Controller) preemptGang(ctx context.Context, members []*gangMember) (string, error) {
	summary := ""
	var victims []string
	for _, m := range members {
		p := m.d.preemption
		if p == nil {
			continue
		}
		if err := c.preempt(ctx, m.pod, p); err != nil {
			return "", err
		}
		if p.reason != "" {
			summary = p.summary()
			continue
		}
		for _, v := range p.victims {
			victims = append(victims, v.Key)
		}
		summary = "members nominated"
	}
	if summary == "members nominated" {
		if len(victims) > 0 {
			summary = "preempting " + strings.Join(victims, ", ")
		} else {
			summary = "members nominated, waiting for preempted pods to terminate"
		}
	}
	return summary, nil
}

// restoreNominations rebuilds, after a restart, the holds of the pending
// pods nominated before it: status.nominatedNodeName is all that persists
// of a nomination, so the devices each would get on that node (with the
// pods of lower priority and the terminating ones gone, as when it was
// nominated) are held again, from the highest priority down, before any
// pod is placed. A pod that no longer fits there keeps no hold; its own
// sync decides again. Nothing is evicted here.
func (c *Controller) restoreNominations(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods from cache: %w", err)
	}
	pods = slices.DeleteFunc(slices.Clone(pods), func(pod *corev1.Pod) bool {
		return pod.Status.NominatedNodeName == "" || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil
	})
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if pa, pb := c.victimPriority(a), c.victimPriority(b); pa != pb {
			return int(pb) - int(pa)
		}
		return strings.Compare(podKey(a), podKey(b))
	})
	for _, pod := range pods {
		claims, waiting, err := c.claimsOfPod(pod)
		if err != nil || waiting != "" {
			continue
		}
		node, err := c.nodeLister.Get(pod.Status.NominatedNodeName)
		if err != nil {
			continue
		}
		if err := c.restoreNominationLocked(ctx, pod, claims, node); err != nil {
			return err
		}
	}
	logger.V(2).Info("Restored nominations", "nominated", len(pods), "held", len(c.nominations))
	return nil
}

func (c *Controller) restoreNominationLocked(ctx context.Context, pod *corev1.Pod, claims []*resourcev1.ResourceClaim, node *corev1.Node) error {
	t := c.tracker
	t.mutex.Lock()
	defer t.mutex.Unlock()
	toAllocate, _, err := c.podClaimsLocked(pod, claims, &decision{})
	if err != nil || len(toAllocate) == 0 {
		return nil
	}
	inv, err := c.currentInventoryLocked(klog.FromContext(ctx))
	if err != nil {
		return err
	}
	cluster, err := c.preemptionClusterLocked(inv)
	if err != nil {
		return err
	}
	// A gang member holds with its group's priority, as when nominated.
	priority := c.victimPriority(pod)
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
	c.nominations[pod.UID] = n
	c.preemptionInputs.Add(1)
	c.setHoldsLocked(n, true)
	return nil
}

// noPreemption remembers a victim search that found none, with
// Controller.preemptionInputs as it was before the search.
type noPreemption struct {
	inputs int64
	reason string
}

// countingHandler bumps the count of changes the victim search depends
// on (pods, nodes, claims, slices, classes, taint rules) before funcs.
func countingHandler(count *atomic.Int64, funcs cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			count.Add(1)
			funcs.OnAdd(obj, false)
		},
		UpdateFunc: func(oldObj, obj any) {
			count.Add(1)
			funcs.OnUpdate(oldObj, obj)
		},
		DeleteFunc: func(obj any) {
			count.Add(1)
			funcs.OnDelete(obj)
		},
	}
}
