package allocation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	schedulingapply "k8s.io/client-go/applyconfigurations/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

const (
	// groupKeyPrefix marks work queue keys of PodGroups:
	// "podgroup:<namespace>/<name>". The pods of a gang are placed by
	// their group's key.
	groupKeyPrefix = "podgroup:"

	// Event reasons on PodGroups, and the reason of a True
	// PodGroupInitiallyScheduled condition.
	ReasonGroupScheduled       = "Scheduled"
	ReasonGroupFailedScheduled = "FailedScheduling"
)

func groupKey(namespace, name string) string { return groupKeyPrefix + namespace + "/" + name }

// gangPod routes an unbound pod of a gang to its group: its key is the
// group's. A pod of a basic group, or of none, is placed alone.
func (c *Controller) gangPod(pod *corev1.Pod) (string, bool) {
	if c.podGroupLister == nil || pod.Spec.NodeName != "" {
		return "", false
	}
	name := podclaims.GroupOf(pod)
	if name == "" {
		return "", false
	}
	group, err := c.podGroupLister.PodGroups(pod.Namespace).Get(name)
	if err == nil && group.Spec.SchedulingPolicy.Gang == nil {
		return "", false
	}
	// A missing group is waited for by its key, as upstream's scheduler
	// waits for it.
	return groupKey(pod.Namespace, name), true
}

// onPodGroup queues the group: a new group or a changed minCount may let
// its pods be placed.
func (c *Controller) onPodGroup(logger klog.Logger, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	group, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		logger.Error(nil, "Unexpected object in PodGroup event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	key := groupKey(group.Namespace, group.Name)
	c.clearUnschedulable(key)
	c.queue.Add(key)
	// Pods of a group that turned basic, or went, are placed alone.
	pods, _ := c.podIndexer.ByIndex(podclaims.PodsByGroupIndex, group.Namespace+"/"+group.Name)
	if group.Spec.SchedulingPolicy.Gang == nil {
		for _, obj := range pods {
			c.onPod(logger, obj, false)
		}
	}
}

// gangMember is one unbound pod of the gang being placed.
type gangMember struct {
	pod    *corev1.Pod
	claims []*resourcev1.ResourceClaim
	d      *decision
	// toAllocate are the claims in internal form that need an
	// allocation, aligned with the allocator's member claims.
	toAllocate []*resourceapi.ResourceClaim
}

// syncGroup places the pending pods of a gang: none until at least
// minCount of the group's pods can be placed at once with all their
// claims; then all of those in one decision. Once the group is placed,
// later pods join it where they fit (in its topology domain).
// It is long because the group's states (not placed, placed and joining,
// preempting) are decided under one hold of the placement state's lock; splitting
// it is left to the next change of this function.
func (c *Controller) syncGroup(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, groupKeyPrefix))
	if err != nil {
		klog.FromContext(ctx).Error(err, "Dropping malformed work item", "key", key)
		return nil
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podGroup", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)
	eventsBefore := c.unschedulable.clusterEvents.Load()

	objs, err := c.podIndexer.ByIndex(podclaims.PodsByGroupIndex, namespace+"/"+name)
	if err != nil {
		return fmt.Errorf("list pods of group %s: %w", key, err)
	}
	var bound, pending []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if !c.handles(pod) || podclaims.IsDone(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Spec.NodeName != "" {
			bound = append(bound, pod)
			continue
		}
		if _, ok := c.bound.get(pod.UID); ok {
			bound = append(bound, pod)
			continue
		}
		if c.mode.NotPlaceable(pod) != "" {
			continue
		}
		pending = append(pending, pod)
	}
	if len(pending) == 0 {
		c.clearUnschedulable(key)
		return nil
	}
	slices.SortFunc(pending, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })

	group, err := c.podGroupLister.PodGroups(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		message := fmt.Sprintf("waiting for PodGroup %s to exist", name)
		for _, pod := range pending {
			if err := c.setPodCondition(ctx, pod, corev1.PodScheduled, corev1.ConditionFalse, ReasonUnschedulable, message); err != nil {
				return err
			}
		}
		// Its creation queues the key.
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PodGroup %s from cache: %w", key, err)
	}
	if group.Spec.SchedulingPolicy.Gang == nil {
		// Basic: its pods are placed alone.
		for _, pod := range pending {
			c.queue.Add(podKey(pod))
		}
		return nil
	}

	minCount := int(group.Spec.SchedulingPolicy.Gang.MinCount)
	placed := groupScheduled(group) || len(bound) >= minCount
	need := minCount - len(bound)
	if placed {
		need = 0
	}
	if len(pending) < need {
		message := fmt.Sprintf("%d of the %d pods that must be placed together exist", len(pending)+len(bound), minCount)
		logger.V(4).Info("Waiting for pods of the group", "pods", len(pending)+len(bound), "minCount", minCount)
		return c.reportGroupUnschedulable(ctx, key, group, pending, eventsBefore, message, false)
	}

	members := make([]*gangMember, 0, len(pending))
	for _, pod := range pending {
		claims, waiting, err := c.claimsOfPod(pod)
		if err != nil {
			return c.reportGroupUnschedulable(ctx, key, group, pending, eventsBefore, fmt.Sprintf("pod %s: %v", pod.Name, err), true)
		}
		if waiting == "" {
			if waiting, err = c.extendedResourceClaimPending(pod); err != nil {
				return err
			}
		}
		if waiting != "" {
			// The claim handler brings the pod, and so the group, back.
			logger.V(5).Info("Waiting for claims", "pod", klog.KObj(pod), "reason", waiting)
			return nil
		}
		members = append(members, &gangMember{pod: pod, claims: claims, d: &decision{}})
	}

	result, err := c.state.decideGang(ctx, group, bound, members, need, placed)
	if errors.Is(err, errRetryLater) {
		return err
	}
	if err != nil {
		allocationAttempts.WithLabelValues(resultError).Inc()
		return err
	}
	if result.Placements == nil {
		if placed {
			// Nothing of the rest fits now; they wait for the cluster.
			c.markUnschedulable(key, eventsBefore)
			reason, err := c.preemptLaterMembers(ctx, members, gangReason(result))
			if err != nil {
				return err
			}
			message := truncate(fmt.Sprintf("PodGroup %s is placed; %s", group.Name, reason), maxMessageLength)
			for _, pod := range pending {
				if err := c.setPodCondition(ctx, pod, corev1.PodScheduled, corev1.ConditionFalse, ReasonUnschedulable, message); err != nil {
					return err
				}
			}
			return errUnschedulable
		}
		reason := gangReason(result)
		if summary, err := c.preemptGang(ctx, members); err != nil {
			return err
		} else if summary != "" {
			reason += "; " + summary
		}
		return c.reportGroupUnschedulable(ctx, key, group, pending, eventsBefore, reason, true)
	}
	return c.commitGang(ctx, key, group, members, result, eventsBefore, placed)
}

// groupScheduled: the group's PodGroupInitiallyScheduled condition is
// True; it stays so (upstream: a terminal state).
func groupScheduled(group *schedulingv1beta1.PodGroup) bool {
	for _, c := range group.Status.Conditions {
		if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// commitGang writes every placed member's claims, then binds them. When a
// claim write fails, what the gang wrote is undone and nothing is bound.
func (c *Controller) commitGang(ctx context.Context, key string, group *schedulingv1beta1.PodGroup, members []*gangMember, result allocator.GangResult, eventsBefore int64, placed bool) error {
	logger := klog.FromContext(ctx)
	type written struct {
		m    *gangMember
		done []*podClaim
	}
	var wrote []written
	var placements []*gangMember
	for _, p := range result.Placements {
		placements = append(placements, members[p.Member])
	}
	for _, m := range placements {
		done, err := c.writeClaims(ctx, podKey(m.pod), m.pod, m.d)
		wrote = append(wrote, written{m, done})
		if err == nil {
			continue
		}
		var errs []error
		for _, w := range wrote {
			if rollbackErr := c.rollback(ctx, podKey(w.m.pod), w.m.pod, w.m.d, w.done); rollbackErr != nil {
				errs = append(errs, rollbackErr)
			}
		}
		// Claims of members not attempted are only in the tracker.
		for _, other := range placements[len(wrote):] {
			for _, pc := range other.d.claims {
				if pc.newAllocation != nil {
					c.state.dropIfWriting(pc.claim.UID)
				}
			}
		}
		c.requeueUnschedulable(logger, "gang attempt released its allocations", klog.KObj(group), key)
		allocationAttempts.WithLabelValues(resultError).Inc()
		return errors.Join(append([]error{fmt.Errorf("pod %s: %w", klog.KObj(m.pod), err)}, errs...)...)
	}

	var nodes []string
	for _, m := range placements {
		pod := m.pod
		if bind, err := c.awaitBindingConditions(ctx, podKey(pod), pod, m.d); !bind || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if err := c.mode.Place(ctx, c.kubeClient, pod, m.d.node); err != nil {
			c.eventf(pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Binding to node %s: %v", m.d.node, err)
			return fmt.Errorf("bind pod %s of group %s: %w", klog.KObj(pod), group.Name, err)
		}
		c.bound.add(pod.UID, m.d.node)
		if c.nodeRequests != nil {
			c.nodeRequests.assume(pod, m.d.node)
		}
		if pod.Status.NominatedNodeName != "" {
			if err := c.setNominatedNode(ctx, pod, ""); err != nil {
				logger.Error(err, "Clearing the nomination", "pod", klog.KObj(pod))
			}
		}
		c.bindingDone(pod, m.d)
		c.clearUnschedulable(podKey(pod))
		allocationAttempts.WithLabelValues(resultPlaced).Inc()
		podsPlaced.Inc()
		podBindingLatency.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
		c.eventf(pod, corev1.EventTypeNormal, ReasonScheduled, "Successfully assigned %s to %s with PodGroup %s", klog.KObj(pod), m.d.node, group.Name)
		nodes = append(nodes, m.d.node)
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	logger.V(2).Info("Placed pods of the group", "pods", len(placements), "nodes", nodes, "domain", result.Domain)
	c.clearUnschedulable(key)
	if placed {
		if len(placements) < len(members) {
			// The rest waits for the cluster.
			c.markUnschedulable(key, eventsBefore)
		}
		return nil
	}
	message := fmt.Sprintf("%d pods placed on %d nodes", len(placements), len(nodes))
	if result.Domain != "" {
		message += fmt.Sprintf(" in %s=%s", group.Spec.SchedulingConstraints.Topology[0].Key, result.Domain)
	}
	c.groupEventf(group, corev1.EventTypeNormal, ReasonGroupScheduled, "%s", message)
	if err := c.setGroupCondition(ctx, group, metav1.ConditionTrue, ReasonGroupScheduled, message); err != nil {
		return err
	}
	if len(placements) < len(members) {
		c.markUnschedulable(key, eventsBefore)
	}
	return nil
}

// reportGroupUnschedulable says why the gang is not placed: the group's
// condition, an event on the group when asked, and each pending pod's
// PodScheduled condition. The group waits for a cluster event.
func (c *Controller) reportGroupUnschedulable(ctx context.Context, key string, group *schedulingv1beta1.PodGroup, pending []*corev1.Pod, eventsBefore int64, message string, event bool) error {
	allocationAttempts.WithLabelValues(resultUnschedulable).Inc()
	c.markUnschedulable(key, eventsBefore)
	message = truncate(message, maxMessageLength)
	klog.FromContext(ctx).V(3).Info("Group does not fit", "reason", message)
	if event && !conditionSays(group, message) {
		c.groupEventf(group, corev1.EventTypeWarning, ReasonGroupFailedScheduled, "%s", message)
	}
	if err := c.setGroupCondition(ctx, group, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable, message); err != nil {
		return err
	}
	podMessage := truncate(fmt.Sprintf("PodGroup %s: %s", group.Name, message), maxMessageLength)
	for _, pod := range pending {
		if err := c.setPodCondition(ctx, pod, corev1.PodScheduled, corev1.ConditionFalse, ReasonUnschedulable, podMessage); err != nil {
			return err
		}
	}
	return errUnschedulable
}

// conditionSays: the group's PodGroupInitiallyScheduled says message
// already (its event was recorded then).
func conditionSays(group *schedulingv1beta1.PodGroup, message string) bool {
	for _, c := range group.Status.Conditions {
		if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled {
			return c.Message == message
		}
	}
	return false
}

// gangReason is the shortest reason of the gang's failure: the member
// that could not be placed, and the shortest per-request explanation of
// why not.
func gangReason(result allocator.GangResult) string {
	if len(result.Rejected) == 0 || result.FailedMember == "" || result.BudgetExhausted {
		return result.Reason
	}
	parts := strings.Split(explainRequests(&allocator.Selection{Rejected: result.Rejected}), "; ")
	shortest := parts[0]
	for _, part := range parts[1:] {
		if len(part) < len(shortest) {
			shortest = part
		}
	}
	// The allocator's reason says in which domain the member failed.
	prefix := ""
	if i := strings.Index(result.Reason, "pod "+result.FailedMember); i > 0 {
		prefix = result.Reason[:i]
	}
	return fmt.Sprintf("%spod %s cannot be placed with the others: %s", prefix, result.FailedMember, shortest)
}

// setGroupCondition records PodGroupInitiallyScheduled, unless the group
// says so already.
func (c *Controller) setGroupCondition(ctx context.Context, group *schedulingv1beta1.PodGroup, status metav1.ConditionStatus, reason, message string) error {
	transition, unchanged := transitionOf(group.Status.Conditions, func(c metav1.Condition) conditionFields {
		return conditionFields{c.Type, string(c.Status), c.Reason, c.Message, c.LastTransitionTime}
	}, conditionFields{schedulingv1beta1.PodGroupInitiallyScheduled, string(status), reason, message, metav1.Time{}})
	if unchanged {
		return nil
	}
	apply := schedulingapply.PodGroup(group.Name, group.Namespace).
		WithUID(group.UID).
		WithStatus(schedulingapply.PodGroupStatus().WithConditions(metav1apply.Condition().
			WithType(schedulingv1beta1.PodGroupInitiallyScheduled).
			WithStatus(status).
			WithReason(reason).
			WithMessage(message).
			WithObservedGeneration(group.Generation).
			WithLastTransitionTime(transition)))
	if _, err := c.kubeClient.SchedulingV1beta1().PodGroups(group.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return fmt.Errorf("set %s=%s on PodGroup %s: %w", schedulingv1beta1.PodGroupInitiallyScheduled, status, klog.KObj(group), err)
	}
	return nil
}

func (c *Controller) groupEventf(group *schedulingv1beta1.PodGroup, eventType, reason, messageFmt string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(group, eventType, reason, messageFmt, args...)
	}
}
