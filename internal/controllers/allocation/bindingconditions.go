package allocation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

// Binding conditions (KEP-5007): a device may list conditions that its
// driver must report True in the claim's status.devices entry before a
// pod that uses it is bound, for example once the device is attached to
// the node. The controller allocates and reserves as usual, then holds
// the binding back: the pod waits, with PodScheduled=False and reason
// ReasonBindingConditionsPending, and is looked at again when its claims
// change and at the deadline. A binding failure condition that turns
// True, or the deadline (allocationTimestamp + binding timeout) passing,
// deallocates the claim and places the pod again; the devices that
// failed are avoided for that pod while others fit.

const (
	// DefaultBindingTimeout is upstream's: how long after the allocation
	// a pod waits for the binding conditions of its devices.
	DefaultBindingTimeout = 600 * time.Second

	// ReasonBindingConditionsPending is the reason of the event and the
	// PodScheduled=False condition of a pod that waits for binding
	// conditions (upstream's event reason).
	ReasonBindingConditionsPending = "BindingConditionsPending"
	// ReasonBindingConditionsFailed: a device reported a binding failure
	// condition; its claim was deallocated.
	ReasonBindingConditionsFailed = "BindingConditionsFailed"
	// ReasonBindingConditionsTimeout: the binding conditions were not met
	// within the binding timeout; the claim was deallocated.
	ReasonBindingConditionsTimeout = "BindingConditionsTimeout"
)

// claimBinding is what a claim's binding conditions say right now.
type claimBinding struct {
	// conditional: some device of the allocation lists binding
	// conditions.
	conditional bool
	// pending describes the devices whose conditions are not all True.
	pending []string
	// failure describes a device that reported a failure condition;
	// failedDevices are the devices with failure conditions or unmet
	// conditions when it failed or timed out.
	failure       string
	failedDevices []allocator.DeviceID
	// deadline is when the conditions time out.
	deadline time.Time
	timedOut bool
}

// checkClaimBinding evaluates the binding conditions of an allocation
// against the claim's status.devices. The status counts only when it
// belongs to this allocation (same allocationTimestamp): a stale copy of
// the claim from before a reallocation says nothing about the new one.
// allocatedAt stands in for a missing allocationTimestamp.
func checkClaimBinding(claim *resourcev1.ResourceClaim, allocation *resourceapi.AllocationResult, allocatedAt time.Time, timeout time.Duration, now time.Time) claimBinding {
	var b claimBinding
	if allocation == nil {
		return b
	}
	var statuses []resourcev1.AllocatedDeviceStatus
	if current := claim.Status.Allocation; current != nil && sameTimestamp(current.AllocationTimestamp, allocation.AllocationTimestamp) {
		statuses = claim.Status.Devices
	}
	if allocation.AllocationTimestamp != nil {
		allocatedAt = allocation.AllocationTimestamp.Time
	}
	b.deadline = allocatedAt.Add(timeout)
	var unmet []allocator.DeviceID
	for _, result := range allocation.Devices.Results {
		if len(result.BindingConditions) == 0 {
			continue
		}
		b.conditional = true
		id := allocator.DeviceID{Driver: result.Driver, Pool: result.Pool, Device: result.Device}
		var conditions []metav1.Condition
		if i := slices.IndexFunc(statuses, func(s resourcev1.AllocatedDeviceStatus) bool {
			return s.Driver == result.Driver && s.Pool == result.Pool && s.Device == result.Device
		}); i >= 0 {
			conditions = statuses[i].Conditions
		}
		for _, failure := range result.BindingFailureConditions {
			if c := apimeta.FindStatusCondition(conditions, failure); c != nil && c.Status == metav1.ConditionTrue && b.failure == "" {
				b.failure = fmt.Sprintf("device %s of claim %s reports %s=True", id, klog.KObj(claim), failure)
				if c.Reason != "" || c.Message != "" {
					b.failure += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
				}
				b.failedDevices = append(b.failedDevices, id)
			}
		}
		var missing []string
		for _, condition := range result.BindingConditions {
			if !apimeta.IsStatusConditionTrue(conditions, condition) {
				missing = append(missing, condition)
			}
		}
		if len(missing) > 0 {
			b.pending = append(b.pending, fmt.Sprintf("%s of device %s (claim %s)", strings.Join(missing, ", "), id, klog.KObj(claim)))
			unmet = append(unmet, id)
		}
	}
	if b.failure == "" && len(b.pending) > 0 && !now.Before(b.deadline) {
		b.timedOut = true
		b.failedDevices = unmet
	}
	return b
}

// allocatedAt is when the timeout of an allocation started: its
// allocationTimestamp, or when this controller first saw the claim wait
// if the allocation has none (written by someone else).
func (c *Controller) allocatedAt(claim types.UID, allocation *resourceapi.AllocationResult, now time.Time) time.Time {
	if allocation == nil || allocation.AllocationTimestamp != nil {
		return now
	}
	for _, result := range allocation.Devices.Results {
		if len(result.BindingConditions) > 0 {
			return c.waits.firstSeen(claim, now)
		}
	}
	return now
}

// sameTimestamp compares to the second: that is what the API keeps.
func sameTimestamp(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Unix() == b.Unix()
}

// gaveUp: the allocation must go.
func (b *claimBinding) gaveUp() bool { return b.failure != "" || b.timedOut }

// awaitBindingConditions decides whether the pod, whose claims are
// allocated and reserved, may be bound now. While a device's conditions
// are pending it records why the pod waits and makes sure it is looked at
// again at the deadline; when they failed or timed out it deallocates the
// claims concerned and has the pod placed again. With the
// DRADeviceBindingConditions gate off, pods are bound at once, as
// upstream's scheduler does.
func (c *Controller) awaitBindingConditions(ctx context.Context, key string, pod *corev1.Pod, d *decision) (bool, error) {
	if !features.Enabled(features.DRADeviceBindingConditions) {
		return true, nil
	}
	now := c.clock.Now()
	var pending []string
	var deadline time.Time
	var abandon []*podClaim
	bindings := make(map[*podClaim]claimBinding, len(d.claims))
	for _, pc := range d.claims {
		allocation := pc.newAllocation
		if allocation == nil {
			allocation = pc.allocation
		}
		b := checkClaimBinding(pc.claim, allocation, c.allocatedAt(pc.claim.UID, allocation, now), c.bindingTimeout, now)
		if !b.conditional {
			continue
		}
		bindings[pc] = b
		if b.gaveUp() {
			abandon = append(abandon, pc)
		}
		pending = append(pending, b.pending...)
		if len(b.pending) > 0 && (deadline.IsZero() || b.deadline.Before(deadline)) {
			deadline = b.deadline
		}
	}
	if len(abandon) > 0 {
		return false, c.abandonBinding(ctx, key, pod, d.node, abandon, bindings)
	}
	if len(pending) == 0 {
		if len(bindings) > 0 {
			bindingOutcomes.WithLabelValues("met").Inc()
		}
		return true, nil
	}
	sort.Strings(pending)
	message := truncate(fmt.Sprintf("waiting for the binding conditions %s on node %s; gives up at %s (binding timeout %s)",
		strings.Join(pending, "; "), d.node, deadline.UTC().Format(time.RFC3339), c.bindingTimeout), maxMessageLength)
	if c.waits.announce(pod.UID, d.node+"@"+deadline.String()) {
		klog.FromContext(ctx).V(2).Info("Waiting for binding conditions", "node", d.node, "pending", pending, "deadline", deadline)
		c.eventf(pod, corev1.EventTypeNormal, ReasonBindingConditionsPending, "waiting for binding conditions for device on node %s: %s", d.node, truncate(strings.Join(pending, "; "), maxMessageLength))
	}
	// Claim events bring the pod back when a condition changes; the
	// deadline (a little after it, so that it has passed) otherwise.
	c.queue.AddAfter(key, deadline.Sub(now)+10*time.Millisecond)
	return false, c.setPodCondition(ctx, pod, corev1.PodScheduled, corev1.ConditionFalse, ReasonBindingConditionsPending, message)
}

// abandonBinding deallocates the claims whose binding conditions failed
// or timed out (unreserving the pod where others still use the claim),
// remembers their devices as ones to avoid for the pod, says why on the
// pod and has it placed again after its backoff.
func (c *Controller) abandonBinding(ctx context.Context, key string, pod *corev1.Pod, node string, abandon []*podClaim, bindings map[*podClaim]claimBinding) error {
	logger := klog.FromContext(ctx)
	// A failure reported by a driver says more than a timeout.
	reason, what := ReasonBindingConditionsTimeout, "timed out"
	var whys []string
	for _, pc := range abandon {
		b := bindings[pc]
		if b.failure != "" {
			whys = append(whys, b.failure)
			reason, what = ReasonBindingConditionsFailed, "failed"
		} else {
			whys = append(whys, fmt.Sprintf("%s not met within %s", strings.Join(b.pending, "; "), c.bindingTimeout))
		}
	}
	var errs []error
	wrote, released := false, false
	for _, pc := range abandon {
		written, deallocated, err := c.releaseClaim(ctx, key, pod, pc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wrote, released = wrote || written, released || deallocated
		c.waits.released(pod.UID, pc.claim.UID, bindings[pc].failedDevices)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !wrote {
		// The cache is behind: the claims were released already or
		// changed meanwhile. Nothing new to tell.
		return fmt.Errorf("%w: claims of the pod changed since they were cached", errRetryLater)
	}
	if released {
		// Freed devices may let parked pods fit; the echo of the
		// write does not tell them (see ownWrites).
		c.requeueUnschedulable(logger, "binding conditions "+what, klog.KObj(pod), key)
	}
	c.waits.reset(pod.UID)
	bindingOutcomes.WithLabelValues(what).Inc()
	message := truncate(fmt.Sprintf("binding conditions %s on node %s: %s; the pod is scheduled again", what, node, strings.Join(whys, "; ")), maxMessageLength)
	logger.V(2).Info("Gave up waiting for binding conditions", "node", node, "reason", message)
	c.eventf(pod, corev1.EventTypeWarning, reason, "%s", message)
	if err := c.setPodCondition(ctx, pod, corev1.PodScheduled, corev1.ConditionFalse, reason, message); err != nil {
		return err
	}
	return fmt.Errorf("%w: binding conditions %s", errRetryLater, what)
}

// releaseClaim takes the pod out of the claim's reservedFor and, when
// nobody else is in it, deallocates the claim (allocation and device
// status go). It works on the claim as stored and only when that still
// holds the allocation that failed or timed out: a stale cache must not
// undo a newer allocation, nor a condition that turned True meanwhile.
func (c *Controller) releaseClaim(ctx context.Context, key string, pod *corev1.Pod, pc *podClaim) (wrote, deallocated bool, err error) {
	claims := c.resourceClient.ResourceV1().ResourceClaims(pc.claim.Namespace)
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		wrote, deallocated = false, false
		claim, err := claims.Get(ctx, pc.claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if claim.UID != pc.claim.UID || claim.Status.Allocation == nil {
			return nil
		}
		allocation := &resourceapi.AllocationResult{}
		if err := resourcev1.Convert_v1_AllocationResult_To_resource_AllocationResult(claim.Status.Allocation, allocation, nil); err != nil {
			return err
		}
		now := c.clock.Now()
		fresh := checkClaimBinding(claim, allocation, c.allocatedAt(claim.UID, allocation, now), c.bindingTimeout, now)
		if !fresh.gaveUp() {
			// Met, or allocated anew, meanwhile: the next sync sees it.
			return nil
		}
		reserved := slices.ContainsFunc(claim.Status.ReservedFor, func(consumer resourcev1.ResourceClaimConsumerReference) bool {
			return consumer.UID == pod.UID
		})
		if !reserved && len(claim.Status.ReservedFor) > 0 {
			// Not the pod's to release.
			return nil
		}
		claim = claim.DeepCopy()
		claim.Status.ReservedFor = slices.DeleteFunc(claim.Status.ReservedFor, func(consumer resourcev1.ResourceClaimConsumerReference) bool {
			return consumer.UID == pod.UID
		})
		if len(claim.Status.ReservedFor) == 0 {
			claim.Status.ReservedFor = nil
			claim.Status.Allocation = nil
			claim.Status.Devices = nil
			deallocated = true
		}
		if _, err := c.ownWrite(claim.UID, key, func() (*resourcev1.ResourceClaim, error) {
			return claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
		}); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("release claim %s after its binding conditions gave up: %w", klog.KObj(pc.claim), err)
	}
	if deallocated {
		c.state.drop(pc.claim.UID)
	}
	if wrote {
		klog.FromContext(ctx).V(2).Info("Released claim after its binding conditions gave up", "claim", klog.KObj(pc.claim), "deallocated", deallocated)
	}
	return wrote, deallocated, nil
}

// bindingWaits is the controller's memory of pods and claims waiting for
// binding conditions.
type bindingWaits struct {
	mutex sync.Mutex
	// announced is, per pod, what its last "waiting" event was about.
	announced map[types.UID]string
	// avoided are, per pod, the devices whose binding conditions failed
	// or timed out for it.
	avoided map[types.UID]map[allocator.DeviceID]struct{}
	// seen is when the controller first saw a claim waiting, the start of
	// its timeout when its allocation has no allocationTimestamp.
	seen map[types.UID]time.Time
}

func newBindingWaits() *bindingWaits {
	return &bindingWaits{
		announced: map[types.UID]string{},
		avoided:   map[types.UID]map[allocator.DeviceID]struct{}{},
		seen:      map[types.UID]time.Time{},
	}
}

// announce reports whether the pod's wait is news (and remembers it).
func (w *bindingWaits) announce(pod types.UID, what string) bool {
	w.mutex.Lock()
	defer w.mutex.Unlock()
	if w.announced[pod] == what {
		return false
	}
	w.announced[pod] = what
	return true
}

func (w *bindingWaits) firstSeen(claim types.UID, now time.Time) time.Time {
	w.mutex.Lock()
	defer w.mutex.Unlock()
	if t, ok := w.seen[claim]; ok {
		return t
	}
	w.seen[claim] = now
	return now
}

// released: the claim was released after its binding conditions gave up
// for the pod. Its next allocation waits anew, and the pod avoids the
// devices that failed or timed out.
func (w *bindingWaits) released(pod, claim types.UID, devices []allocator.DeviceID) {
	w.mutex.Lock()
	defer w.mutex.Unlock()
	delete(w.seen, claim)
	if len(devices) == 0 {
		return
	}
	if w.avoided[pod] == nil {
		w.avoided[pod] = map[allocator.DeviceID]struct{}{}
	}
	for _, id := range devices {
		w.avoided[pod][id] = struct{}{}
	}
}

// addAvoided returns a copy of inUse (the tracker's, which it keeps up to
// date in place) that counts the devices the pod avoids as allocated; it
// reports whether there were any.
func (w *bindingWaits) addAvoided(pod types.UID, inUse *allocator.InUse) (*allocator.InUse, bool) {
	w.mutex.Lock()
	defer w.mutex.Unlock()
	avoided := w.avoided[pod]
	if len(avoided) == 0 {
		return inUse, false
	}
	held := &resourceapi.AllocationResult{}
	for id := range avoided {
		held.Devices.Results = append(held.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "avoided", Driver: id.Driver, Pool: id.Pool, Device: id.Device})
	}
	avoiding := inUse.Clone()
	avoiding.AddAllocation(held)
	return avoiding, true
}

// reset ends the pod's current wait.
func (w *bindingWaits) reset(pod types.UID) {
	w.mutex.Lock()
	defer w.mutex.Unlock()
	delete(w.announced, pod)
}

// done forgets the pod and its claims: it is bound or gone.
func (w *bindingWaits) done(pod types.UID, claims []types.UID) {
	w.mutex.Lock()
	defer w.mutex.Unlock()
	delete(w.announced, pod)
	delete(w.avoided, pod)
	for _, claim := range claims {
		delete(w.seen, claim)
	}
}

// bindingDone: the pod was bound; what it waited for is over.
func (c *Controller) bindingDone(pod *corev1.Pod, d *decision) {
	claims := make([]types.UID, 0, len(d.claims))
	for _, pc := range d.claims {
		claims = append(claims, pc.claim.UID)
	}
	c.waits.done(pod.UID, claims)
}
