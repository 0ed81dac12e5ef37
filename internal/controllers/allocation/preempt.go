package allocation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/preemption"
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
// victims. It makes API calls and runs without the placement state's mutex.
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
		if pa, pb := c.state.victimPriority(a), c.state.victimPriority(b); pa != pb {
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
		if err := c.state.restoreNomination(ctx, pod, claims, node); err != nil {
			return err
		}
	}
	logger.V(2).Info("Restored nominations", "nominated", len(pods), "held", c.state.nominationCount())
	return nil
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

// dropNomination abandons the nomination of a pod that is gone or no
// longer pending: its holds are released, nothing more is evicted; its
// last victim search is forgotten.
func (c *Controller) dropNomination(logger klog.Logger, uid types.UID) {
	n := c.state.dropNomination(uid)
	if n == nil {
		return
	}
	logger.V(2).Info("Abandoned preemption", "pod", n.key, "node", n.node)
	// Other pods may fit in what it held.
	c.requeueUnschedulable(logger, "preemption abandoned", klog.KRef("", n.key), n.key)
}

// dropNominationByKey abandons the nomination of a pod known by key only
// (deleted).
func (c *Controller) dropNominationByKey(logger klog.Logger, key string) {
	if uid := c.state.nominatedByKey(key); uid != "" {
		c.dropNomination(logger, uid)
	}
}
