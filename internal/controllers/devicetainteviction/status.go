package devicetainteviction

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/klog/v2"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1apply "github.com/draplane/draplane/generated/applyconfiguration/resource/v1"
)

// Reasons of the EvictionInProgress condition of a DeviceTaintRule.
const (
	// ReasonPodsPendingEviction (status True): some pods are still to be
	// evicted, because their tolerationSeconds have not run out or the
	// rate limit holds them back.
	ReasonPodsPendingEviction = "PodsPendingEviction"
	// ReasonCompleted (status False): a NoExecute rule with no pod left
	// to evict.
	ReasonCompleted = "Completed"
	// ReasonNotStarted (status False): the effect is NoSchedule or None,
	// which evicts nobody; the message counts the pods that a NoExecute
	// effect would evict.
	ReasonNotStarted = "NotStarted"
)

// ruleCounts are what the condition reports.
type ruleCounts struct {
	// pending pods are going to be evicted because of the rule.
	pending int
	// evicted and cancelled count since this controller started.
	evicted, cancelled int
	// untolerating counts the pods whose devices the rule selects and that
	// do not tolerate its taint; reported when the effect does not evict.
	untolerating int
}

// syncAllRules queues the status of every rule.
func (c *Controller) syncAllRules(context.Context) error {
	rules, err := c.ruleLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	for _, rule := range rules {
		c.queue.Add(ruleKeyPrefix + rule.Name)
	}
	return nil
}

// syncRuleStatus applies the EvictionInProgress condition of the rule
// when it changed, at most once per StatusUpdateInterval.
func (c *Controller) syncRuleStatus(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	rule, err := c.ruleLister.Get(name)
	if apierrors.IsNotFound(err) {
		c.mutex.Lock()
		delete(c.lastStatusUpdate, name)
		c.mutex.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("get DeviceTaintRule %s from cache: %w", name, err)
	}

	now := c.clock.Now()
	c.mutex.Lock()
	last, updatedBefore := c.lastStatusUpdate[name]
	c.mutex.Unlock()
	if updatedBefore {
		if wait := c.opts.StatusUpdateInterval - now.Sub(last); wait > 0 {
			c.queue.AddAfter(ruleKeyPrefix+name, wait)
			return nil
		}
	}

	counts, err := c.ruleCounts(rule)
	if err != nil {
		return err
	}
	status, reason, message := ruleCondition(rule, counts)
	existing := meta.FindStatusCondition(rule.Status.Conditions, resourceapi.DeviceTaintConditionEvictionInProgress)
	if existing != nil && existing.Status == status && existing.Reason == reason &&
		existing.Message == message && existing.ObservedGeneration == rule.Generation {
		return nil
	}
	transition := metav1.NewTime(now)
	if existing != nil && existing.Status == status {
		transition = existing.LastTransitionTime
	}
	ruleApply := resourcev1apply.DeviceTaintRule(name).WithStatus(resourcev1apply.DeviceTaintRuleStatus().WithConditions(
		metav1apply.Condition().
			WithType(resourceapi.DeviceTaintConditionEvictionInProgress).
			WithStatus(status).
			WithReason(reason).
			WithMessage(message).
			WithObservedGeneration(rule.Generation).
			WithLastTransitionTime(transition)))
	if _, err := c.resourceClient.ResourceV1().DeviceTaintRules().ApplyStatus(ctx, ruleApply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("apply status of DeviceTaintRule %s: %w", name, err)
	}
	logger.V(3).Info("Updated DeviceTaintRule status", "rule", klog.KObj(rule), "reason", reason, "message", message)
	c.mutex.Lock()
	c.lastStatusUpdate[name] = now
	c.mutex.Unlock()
	return nil
}

// ruleCondition is the status, reason and message of EvictionInProgress.
func ruleCondition(rule *resourcev1.DeviceTaintRule, counts ruleCounts) (metav1.ConditionStatus, string, string) {
	if rule.Spec.Taint.Effect != resourcev1.DeviceTaintEffectNoExecute {
		return metav1.ConditionFalse, ReasonNotStarted, fmt.Sprintf(
			"Eviction not started because the effect is %s: %d pods use selected devices without tolerating the taint",
			rule.Spec.Taint.Effect, counts.untolerating)
	}
	message := fmt.Sprintf("%d pods pending eviction, %d pods evicted, %d evictions cancelled",
		counts.pending, counts.evicted, counts.cancelled)
	if counts.pending > 0 {
		return metav1.ConditionTrue, ReasonPodsPendingEviction, message
	}
	return metav1.ConditionFalse, ReasonCompleted, message
}

func (c *Controller) ruleCounts(rule *resourcev1.DeviceTaintRule) (ruleCounts, error) {
	var counts ruleCounts
	c.mutex.Lock()
	for _, pending := range c.pending {
		for _, pendingRule := range pending.decision.rules() {
			if pendingRule.UID == rule.UID {
				counts.pending++
				break
			}
		}
	}
	if progress := c.progress[rule.UID]; progress != nil {
		counts.evicted, counts.cancelled = progress.evicted, progress.cancelled
	}
	c.mutex.Unlock()

	if rule.Spec.Taint.Effect == resourcev1.DeviceTaintEffectNoExecute {
		return counts, nil
	}
	claims, err := c.claimLister.List(labels.Everything())
	if err != nil {
		return counts, fmt.Errorf("list claims: %w", err)
	}
	pods := sets.New[types.UID]()
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			id := deviceID{driver: result.Driver, pool: result.Pool, device: result.Device}
			if !ruleSelects(rule, id) || tolerated(rule.Spec.Taint, result.Tolerations) {
				continue
			}
			for _, pod := range c.consumerPods(claim) {
				pods.Insert(pod.uid)
			}
		}
	}
	counts.untolerating = pods.Len()
	return counts, nil
}
