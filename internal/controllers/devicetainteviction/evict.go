package devicetainteviction

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

const (
	// PodConditionReason is the reason of the DisruptionTarget condition
	// that an evicted pod gets.
	PodConditionReason = "DeletionByDeviceTaintEviction"

	// Event reasons on pods and DeviceTaintRules.
	ReasonEvicting              = "DeviceTaintEviction"
	ReasonEvictionCancelled     = "DeviceTaintEvictionCancelled"
	ReasonRulePodEvicted        = "PodEvicted"
	ReasonRuleEvictionCancelled = "PodEvictionCancelled"
)

// taintsOf lists the taints that apply to a device: those in its slice
// and those of the rules that select it.
func (c *Controller) taintsOf(id deviceID) []appliedTaint {
	var taints []appliedTaint
	if objs, err := c.sliceIndexer.ByIndex(slicesByPoolIndex, id.driver+"/"+id.pool); err == nil {
		poolSlices := make([]*resourcev1.ResourceSlice, 0, len(objs))
		for _, obj := range objs {
			poolSlices = append(poolSlices, obj.(*resourcev1.ResourceSlice))
		}
		taints = sliceTaints(poolSlices, id)
	}
	rules, _ := c.ruleLister.List(labels.Everything())
	for _, rule := range rules {
		if ruleSelects(rule, id) {
			taints = append(taints, ruleTaint(rule, id))
		}
	}
	return taints
}

// claimsReservedFor returns the allocated claims whose reservedFor names
// this pod instance, or its PodGroup (DRAWorkloadResourceClaims).
func (c *Controller) claimsReservedFor(pod *corev1.Pod) []*resourcev1.ResourceClaim {
	objs, err := c.claimIndexer.ByIndex(claimsByConsumerIndex, string(pod.UID))
	if err != nil {
		return nil
	}
	if group := podclaims.GroupOf(pod); group != "" && podclaims.GroupClaimsEnabled() {
		groupClaims, err := c.claimIndexer.ByIndex(claimsByConsumerIndex, groupConsumerKey(pod.Namespace, group))
		if err != nil {
			return nil
		}
		objs = append(objs, groupClaims...)
	}
	claims := make([]*resourcev1.ResourceClaim, 0, len(objs))
	for _, obj := range objs {
		claim := obj.(*resourcev1.ResourceClaim)
		if claim.Namespace == pod.Namespace && claim.Status.Allocation != nil {
			claims = append(claims, claim)
		}
	}
	return claims
}

// syncPod decides whether the pod must be evicted and when, and evicts it
// once that time has come and the rate limit allows.
func (c *Controller) syncPod(ctx context.Context, namespace, name string) error {
	logger := klog.FromContext(ctx)
	key := namespace + "/" + name
	pod, err := c.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone, by our hand or another's: nothing left to do or cancel.
		c.dropPending(ctx, key, true)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	if c.alreadyEvicted(key, pod.UID) {
		return nil
	}
	if pod.DeletionTimestamp != nil || podclaims.IsDone(pod) {
		c.dropPending(ctx, key, false)
		return nil
	}

	decision := decideEviction(c.claimsReservedFor(pod), c.taintsOf)
	if decision == nil {
		c.cancelPending(ctx, pod)
		return nil
	}
	c.setPending(ctx, pod, decision)

	now := c.clock.Now()
	if decision.at.After(now) {
		logger.V(4).Info("Pod eviction scheduled", "pod", klog.KObj(pod), "at", decision.at, "reason", decision.reasons[0].String())
		c.queue.AddAfter(podKeyPrefix+key, decision.at.Sub(now))
		return nil
	}
	if !c.evictionLimiter.TryAccept() {
		retry := time.Duration(float64(time.Second) / c.opts.EvictionsPerSecond)
		logger.V(4).Info("Pod eviction due, waiting for the rate limit", "pod", klog.KObj(pod), "retryAfter", retry)
		c.queue.AddAfter(podKeyPrefix+key, retry)
		return nil
	}
	return c.evict(ctx, pod, decision)
}

// evict marks the pod as disrupted and deletes exactly this instance of
// it.
func (c *Controller) evict(ctx context.Context, pod *corev1.Pod, decision *evictionDecision) error {
	logger := klog.FromContext(ctx)
	key := pod.Namespace + "/" + pod.Name
	reason := decision.reasons[0]
	message := fmt.Sprintf("Evicted because %s, which claim %s does not tolerate", reason, reason.claim)

	condition := corev1apply.PodCondition().
		WithType(corev1.DisruptionTarget).
		WithStatus(corev1.ConditionTrue).
		WithReason(PodConditionReason).
		WithMessage(message).
		WithLastTransitionTime(metav1.NewTime(c.clock.Now()))
	// The UID makes the write fail rather than mark a new pod of the same
	// name.
	podApply := corev1apply.Pod(pod.Name, pod.Namespace).WithUID(pod.UID).WithStatus(corev1apply.PodStatus().WithConditions(condition))
	if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, podApply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		if apierrors.IsNotFound(err) {
			c.dropPending(ctx, key, false)
			return nil
		}
		return fmt.Errorf("add condition %s to pod %s: %w", corev1.DisruptionTarget, key, err)
	}
	c.recordEvent(pod, corev1.EventTypeNormal, ReasonEvicting, message)

	err := c.kubeClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Deleted meanwhile, or replaced by a pod of the same name
		// which gets its own evaluation.
		logger.V(4).Info("Pod gone before eviction", "pod", klog.KObj(pod), "err", err)
		c.dropPending(ctx, key, false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", key, err)
	}

	latency := c.clock.Since(decision.at)
	logger.V(2).Info("Evicted pod", "pod", klog.KObj(pod), "reason", reason.String(), "latency", latency)
	podsEvicted.WithLabelValues(source(reason.appliedTaint)).Inc()
	evictionLatency.Observe(latency.Seconds())

	c.mutex.Lock()
	delete(c.pending, key)
	c.evicted[key] = pod.UID
	for _, rule := range decision.rules() {
		c.progressOf(rule.UID).evicted++
	}
	c.mutex.Unlock()
	for _, rule := range decision.rules() {
		c.recordEvent(rule, corev1.EventTypeNormal, ReasonRulePodEvicted, fmt.Sprintf("Evicted pod %s", key))
		c.queue.Add(ruleKeyPrefix + rule.Name)
	}
	return nil
}

func source(taint appliedTaint) string {
	if taint.rule != nil {
		return "rule"
	}
	return "slice"
}

// setPending records the decision for the pod, replacing an older one,
// and queues the status of every rule whose pending count changes.
func (c *Controller) setPending(ctx context.Context, pod *corev1.Pod, decision *evictionDecision) {
	key := pod.Namespace + "/" + pod.Name
	c.mutex.Lock()
	previous := c.pending[key]
	c.pending[key] = &pendingEviction{podUID: pod.UID, decision: decision}
	c.mutex.Unlock()

	var previousRules []*resourcev1.DeviceTaintRule
	if previous != nil && previous.podUID == pod.UID {
		previousRules = previous.decision.rules()
	}
	c.queueRuleStatusIfChanged(previousRules, decision.rules())
}

// cancelPending forgets the pending eviction of the pod, if any, and
// records that it was cancelled: the taint is gone or now tolerated.
func (c *Controller) cancelPending(ctx context.Context, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	c.mutex.Lock()
	previous := c.pending[key]
	if previous == nil {
		c.mutex.Unlock()
		return
	}
	delete(c.pending, key)
	if previous.podUID != pod.UID {
		// Pending for an earlier pod of that name, which is gone.
		c.mutex.Unlock()
		return
	}
	rules := previous.decision.rules()
	for _, rule := range rules {
		c.progressOf(rule.UID).cancelled++
	}
	c.mutex.Unlock()

	reasons := make([]string, 0, len(previous.decision.reasons))
	for _, reason := range previous.decision.reasons {
		reasons = append(reasons, reason.String())
	}
	message := fmt.Sprintf("Eviction cancelled: the taint is gone or now tolerated (was: %s)", strings.Join(slices.Compact(reasons), "; "))
	klog.FromContext(ctx).V(2).Info("Pod eviction cancelled", "pod", klog.KObj(pod), "reasons", reasons)
	evictionsCancelled.Inc()
	c.recordEvent(pod, corev1.EventTypeNormal, ReasonEvictionCancelled, message)
	for _, rule := range rules {
		c.recordEvent(rule, corev1.EventTypeNormal, ReasonRuleEvictionCancelled, fmt.Sprintf("Eviction of pod %s cancelled", key))
		c.queue.Add(ruleKeyPrefix + rule.Name)
	}
}

// alreadyEvicted reports whether this pod instance was evicted by this
// controller; an eviction record of an earlier pod of that name is
// forgotten.
func (c *Controller) alreadyEvicted(podKey string, uid types.UID) bool {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	evictedUID, ok := c.evicted[podKey]
	if ok && evictedUID != uid {
		delete(c.evicted, podKey)
		return false
	}
	return ok
}

// dropPending forgets the pending eviction of a pod that is gone or going
// anyway; that is no cancellation. Once the pod is gone from the cache
// (goneFromCache), its eviction record goes too.
func (c *Controller) dropPending(ctx context.Context, podKey string, goneFromCache bool) {
	c.mutex.Lock()
	previous := c.pending[podKey]
	delete(c.pending, podKey)
	if goneFromCache {
		delete(c.evicted, podKey)
	}
	c.mutex.Unlock()
	if previous != nil {
		klog.FromContext(ctx).V(4).Info("Pod gone, eviction no longer pending", "pod", podKey)
		c.queueRuleStatusIfChanged(previous.decision.rules(), nil)
	}
}

// queueRuleStatusIfChanged queues the status of the rules that are in
// only one of the lists.
func (c *Controller) queueRuleStatusIfChanged(before, after []*resourcev1.DeviceTaintRule) {
	in := func(rules []*resourcev1.DeviceTaintRule, uid types.UID) bool {
		return slices.ContainsFunc(rules, func(rule *resourcev1.DeviceTaintRule) bool { return rule.UID == uid })
	}
	for _, rule := range before {
		if !in(after, rule.UID) {
			c.queue.Add(ruleKeyPrefix + rule.Name)
		}
	}
	for _, rule := range after {
		if !in(before, rule.UID) {
			c.queue.Add(ruleKeyPrefix + rule.Name)
		}
	}
}

// progressOf must be called with the mutex held.
func (c *Controller) progressOf(uid types.UID) *ruleProgress {
	progress := c.progress[uid]
	if progress == nil {
		progress = &ruleProgress{}
		c.progress[uid] = progress
	}
	return progress
}

// syncRulePods queues every pod whose claims use a device the rule
// selects, and every pod whose pending eviction names the rule (the rule
// may be gone or select other devices now); then the rule's status, which
// thus mostly sees the pods already evaluated.
func (c *Controller) syncRulePods(ctx context.Context, name string) error {
	queued := 0
	c.mutex.Lock()
	for podKey, pending := range c.pending {
		if slices.ContainsFunc(pending.decision.rules(), func(rule *resourcev1.DeviceTaintRule) bool { return rule.Name == name }) {
			c.queue.Add(podKeyPrefix + podKey)
			queued++
		}
	}
	c.mutex.Unlock()

	rule, err := c.ruleLister.Get(name)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(4).Info("DeviceTaintRule gone, checking its pods", "rule", klog.KRef("", name), "pods", queued)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get DeviceTaintRule %s from cache: %w", name, err)
	}
	claims, err := c.claimLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	for _, claim := range claims {
		if !claimUsesRule(claim, rule) {
			continue
		}
		for _, pod := range c.consumerPods(claim) {
			c.queue.Add(podKeyPrefix + claim.Namespace + "/" + pod.name)
			queued++
		}
	}
	klog.FromContext(ctx).V(4).Info("Checking pods of DeviceTaintRule", "rule", klog.KObj(rule), "pods", queued)
	c.queue.Add(ruleKeyPrefix + name)
	return nil
}

func claimUsesRule(claim *resourcev1.ResourceClaim, rule *resourcev1.DeviceTaintRule) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	for _, result := range claim.Status.Allocation.Devices.Results {
		if ruleSelects(rule, deviceID{driver: result.Driver, pool: result.Pool, device: result.Device}) {
			return true
		}
	}
	return false
}

func (c *Controller) recordEvent(obj runtime.Object, eventType, reason, message string) {
	if c.recorder != nil {
		c.recorder.Event(obj, eventType, reason, message)
	}
}
