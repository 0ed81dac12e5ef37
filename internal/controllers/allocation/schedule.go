package allocation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/apis/resource/validation"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
)

const (
	// maxMessageLength keeps condition messages and events readable and
	// within what the API accepts.
	maxMessageLength = 1024

	// maxClaimsPerPod is what the allocator takes in one search.
	maxClaimsPerPod = 64
)

// podClaim is one claim of the pod being placed.
type podClaim struct {
	claim *resourcev1.ResourceClaim
	// allocation is set when the claim is allocated already, by the
	// informer's account or by an allocation this controller made.
	allocation *resourceapi.AllocationResult
	// newAllocation is set when this attempt allocates the claim.
	newAllocation *resourceapi.AllocationResult
	// consumer is whom the claim is reserved for: the pod, or its
	// PodGroup for a group claim (consumerFor).
	consumer resourcev1.ResourceClaimConsumerReference
}

// decision is the outcome of node selection for one pod.
type decision struct {
	node   string
	claims []*podClaim
	// unschedulable explains why no node fits; summary is the one-line
	// condition message, details the per-request reasons for the event.
	unschedulable bool
	summary       string
	details       string
	// preemption is set when a pod that fits nowhere was considered for
	// preemption (preempt.go).
	preemption *preemptionPlan
}

// refuse makes the decision "unschedulable" with one reason for the
// condition and the event.
func (d *decision) refuse(reason string) *decision {
	d.unschedulable = true
	d.summary, d.details = reason, reason
	return d
}

// syncPod places one pod: "<namespace>/<name>".
func (c *Controller) syncPod(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Dropping malformed work item", "key", key)
		return nil
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)

	pod, err := c.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.clearUnschedulable(key)
		c.dropNominationByKey(logger, key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	if !c.handles(pod) || podclaims.IsDone(pod) || pod.DeletionTimestamp != nil {
		c.dropNomination(logger, pod.UID)
		return nil
	}
	if !podmode.Ours(c.mode, pod) {
		// Another scheduler's pod, bound or not: its claims are that
		// scheduler's business.
		return nil
	}
	if pod.Spec.NodeName == "" {
		if reason := c.mode.NotPlaceable(pod); reason != "" {
			// Not ready for us; removing gates is an update.
			logger.V(5).Info("Not placing pod", "reason", reason)
			return nil
		}
	}
	if key, ok := c.gangPod(pod); ok {
		// Placed with its group.
		c.queue.Add(key)
		return nil
	}
	if pod.Spec.NodeName == "" {
		if node, ok := c.bound.get(pod.UID); ok {
			logger.V(5).Info("Pod bound already, waiting for the informer", "node", node)
			return nil
		}
	}

	claims, waiting, err := c.claimsOfPod(pod)
	if err != nil {
		// Retrying cannot help until the pod or its claims change.
		return c.reportUnschedulable(ctx, key, pod, c.unschedulable.clusterEvents.Load(), &decision{unschedulable: true, summary: err.Error(), details: err.Error()})
	}
	if waiting == "" {
		if waiting, err = c.extendedResourceClaimPending(pod); err != nil {
			return err
		}
	}
	if waiting != "" {
		logger.V(5).Info("Waiting for claims", "reason", waiting)
		return nil
	}

	eventsBefore := c.unschedulable.clusterEvents.Load()
	d, err := c.state.decide(ctx, pod, claims)
	if errors.Is(err, errRetryLater) {
		return err
	}
	if err != nil {
		allocationAttempts.WithLabelValues(resultError).Inc()
		return err
	}
	if d.unschedulable {
		if d.preemption != nil {
			if err := c.preempt(ctx, pod, d.preemption); err != nil {
				return err
			}
			d.summary += "; " + d.preemption.summary()
			d.details += "; " + d.preemption.summary()
		}
		return c.reportUnschedulable(ctx, key, pod, eventsBefore, d)
	}
	return c.commit(ctx, key, pod, d, eventsBefore)
}

// claimsOfPod gathers the pod's claims from the informer. waiting is
// set while a claim does not exist yet (it comes back through the claim
// and pod handlers); err when the pod cannot work as it is.
func (c *Controller) claimsOfPod(pod *corev1.Pod) (claims []*resourcev1.ResourceClaim, waiting string, err error) {
	for _, pc := range podclaims.ClaimsOf(pod) {
		name, mustCheckOwner, err := podclaims.ClaimName(pod, pc)
		switch {
		case errors.Is(err, podclaims.ErrClaimNotGenerated):
			return nil, err.Error(), nil
		case err != nil:
			return nil, "", err
		case name == nil:
			continue
		}
		claim, err := c.claimLister.ResourceClaims(pod.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			if pc.ClaimName != nil {
				// Someone has to create it: tell them. Its creation
				// brings the pod back.
				return nil, "", fmt.Errorf("ResourceClaim %s does not exist", *name)
			}
			// The resource claim controller is about to create it.
			return nil, fmt.Sprintf("claim %s does not exist yet", *name), nil
		}
		if err != nil {
			return nil, "", err
		}
		if mustCheckOwner {
			if err := podclaims.IsForPod(pod, claim); err != nil {
				return nil, err.Error(), nil
			}
		}
		if claim.DeletionTimestamp != nil {
			return nil, "", fmt.Errorf("ResourceClaim %s is being deleted", claim.Name)
		}
		if len(claim.Status.ReservedFor) >= resourceapi.ResourceClaimReservedForMaxSize && !podclaims.IsReservedForPod(pod, claim) {
			return nil, "", fmt.Errorf("ResourceClaim %s is reserved for %d consumers already, the maximum", claim.Name, len(claim.Status.ReservedFor))
		}
		if slices.ContainsFunc(claims, func(other *resourcev1.ResourceClaim) bool { return other.UID == claim.UID }) {
			// Named by two pod claims: allocated and reserved once.
			continue
		}
		claims = append(claims, claim)
	}
	return claims, "", nil
}

// refusedAllocation says why the API would refuse to store one of the
// chosen allocations, or "". Refusing it here, before any write, keeps a
// pod whose second claim cannot be written from allocating and rolling
// back its first claim on every attempt.
func refusedAllocation(claims []*resourceapi.ResourceClaim, consumers []resourcev1.ResourceClaimConsumerReference, chosen *allocator.Result) string {
	for i, claim := range claims {
		if errs := validateAllocation(claim, chosen.Allocations[i], consumers[i]); len(errs) > 0 {
			return truncate(fmt.Sprintf("claim %s cannot take its allocation on node %s: %v", klog.KObj(claim), chosen.Node, errs.ToAggregate()), maxMessageLength)
		}
	}
	return ""
}

// consumersToAllocate are the consumers of the decision's claims that
// still need an allocation, aligned with what podClaimsLocked returned.
func consumersToAllocate(d *decision) []resourcev1.ResourceClaimConsumerReference {
	var consumers []resourcev1.ResourceClaimConsumerReference
	for _, pc := range d.claims {
		if pc.allocation == nil {
			consumers = append(consumers, pc.consumer)
		}
	}
	return consumers
}

// validateAllocation checks the status update that would record the
// allocation and the consumer's reservation in the claim, as the API
// will.
func validateAllocation(claim *resourceapi.ResourceClaim, allocation *resourceapi.AllocationResult, consumer resourcev1.ResourceClaimConsumerReference) field.ErrorList {
	updated := *claim
	updated.Status.Allocation = allocation
	updated.Status.ReservedFor = append(slices.Clone(claim.Status.ReservedFor),
		resourceapi.ResourceClaimConsumerReference{APIGroup: consumer.APIGroup, Resource: consumer.Resource, Name: consumer.Name, UID: consumer.UID})
	return validation.ValidateResourceClaimStatusUpdate(&updated, claim)
}

// describeNodeSelector names the node of a selector that names exactly
// one (what the allocator writes), or spells the selector out.
func describeNodeSelector(selector *corev1.NodeSelector) string {
	if len(selector.NodeSelectorTerms) == 1 {
		term := selector.NodeSelectorTerms[0]
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 1 {
			r := term.MatchFields[0]
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return "node " + r.Values[0]
			}
		}
	}
	terms := make([]string, 0, len(selector.NodeSelectorTerms))
	for _, term := range selector.NodeSelectorTerms {
		var requirements []string
		for _, r := range term.MatchExpressions {
			requirements = append(requirements, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		for _, r := range term.MatchFields {
			requirements = append(requirements, fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values))
		}
		terms = append(terms, "("+strings.Join(requirements, ", ")+")")
	}
	return "nodes matching " + strings.Join(terms, " or ")
}

// total counts every node that was looked at.
func (f nodeFilter) total() int {
	return f.notReady + f.unschedulable + f.selector + f.taint + f.allocation + f.resources + f.candidates
}

// explainRequests groups the reasons of the rejected nodes per claim
// request: how many nodes failed it for which reason, with the first
// node's explanation as example.
func explainRequests(selection *allocator.Selection) string {
	type group struct {
		key     string
		nodes   int
		example string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, rejected := range selection.Rejected {
		if rejected.Explanation == nil {
			continue
		}
		for i := range rejected.Explanation.Requests {
			r := &rejected.Explanation.Requests[i]
			key := "claim " + r.Claim
			if r.Request != "" {
				key += " request " + r.Request
			}
			key += ": " + string(r.Reason)
			g := byKey[key]
			if g == nil {
				g = &group{key: key, example: fmt.Sprintf("node %s: %s", rejected.Node, r.Message())}
				byKey[key] = g
				groups = append(groups, g)
			}
			g.nodes++
		}
	}
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%s on %d nodes (%s)", g.key, g.nodes, g.example))
	}
	if len(parts) == 0 {
		return selection.Summary()
	}
	return strings.Join(parts, "; ")
}

// reportUnschedulable reports why the pod does not fit and parks it until the
// cluster changes.
func (c *Controller) reportUnschedulable(ctx context.Context, key string, pod *corev1.Pod, eventsBefore int64, d *decision) error {
	logger := klog.FromContext(ctx)
	allocationAttempts.WithLabelValues(resultUnschedulable).Inc()
	c.markUnschedulable(key, eventsBefore)
	message := truncate(d.summary, maxMessageLength)
	logger.V(3).Info("Pod does not fit", "reason", message)
	if pod.Spec.NodeName != "" {
		// Bound by someone else: PodScheduled is not ours to change, the
		// pod gets a condition of its own.
		c.eventf(pod, corev1.EventTypeWarning, ReasonFailedAllocation, "Allocating claims on node %s: %s", pod.Spec.NodeName, truncate(d.details, maxMessageLength))
		if err := c.setPodCondition(ctx, pod, ConditionClaimsAllocated, corev1.ConditionFalse, ReasonFailedAllocation, message); err != nil {
			return err
		}
		return errUnschedulable
	}
	c.eventf(pod, corev1.EventTypeWarning, ReasonFailedScheduling, "%s", truncate(d.details, maxMessageLength))
	if err := c.setPodCondition(ctx, pod, corev1.PodScheduled, corev1.ConditionFalse, ReasonUnschedulable, message); err != nil {
		return err
	}
	return errUnschedulable
}

// conditionFields are what transitionOf compares of a condition.
type conditionFields struct {
	conditionType, status, reason, message string
	transition                             metav1.Time
}

// transitionOf reports whether the conditions say want already
// (type, status, reason and message), and otherwise the transition time
// to write: the old one while the status stays, now when it changes.
func transitionOf[C any](conditions []C, fields func(C) conditionFields, want conditionFields) (metav1.Time, bool) {
	transition := metav1.Now()
	for _, condition := range conditions {
		have := fields(condition)
		if have.conditionType != want.conditionType {
			continue
		}
		if have.status == want.status && have.reason == want.reason && have.message == want.message {
			return transition, true
		}
		if have.status == want.status {
			transition = have.transition
		}
	}
	return transition, false
}

// setPodCondition records a pod condition, unless the pod says so
// already.
func (c *Controller) setPodCondition(ctx context.Context, pod *corev1.Pod, conditionType corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) error {
	transition, unchanged := transitionOf(pod.Status.Conditions, func(c corev1.PodCondition) conditionFields {
		return conditionFields{string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime}
	}, conditionFields{string(conditionType), string(status), reason, message, metav1.Time{}})
	if unchanged {
		return nil
	}
	podApply := corev1apply.Pod(pod.Name, pod.Namespace).
		WithUID(pod.UID).
		WithStatus(corev1apply.PodStatus().WithConditions(corev1apply.PodCondition().
			WithType(conditionType).
			WithStatus(status).
			WithReason(reason).
			WithMessage(message).
			WithLastTransitionTime(transition)))
	if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, podApply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone or replaced: nothing to report.
			return nil
		}
		return fmt.Errorf("set %s=%s on pod %s: %w", conditionType, status, klog.KObj(pod), err)
	}
	return nil
}

// commit writes the decision: allocations (with the delete protection
// finalizer) and reservations, then the binding. Whatever fails undoes
// what this attempt wrote. A write the API refuses (invalid, forbidden)
// makes the pod unschedulable until something changes: retrying it at
// once would only be refused again.
func (c *Controller) commit(ctx context.Context, key string, pod *corev1.Pod, d *decision, eventsBefore int64) error {
	logger := klog.FromContext(ctx)
	var done []*podClaim
	fail := func(err error) error {
		rollbackErr := c.rollback(ctx, key, pod, d, done)
		if slices.ContainsFunc(d.claims, func(pc *podClaim) bool { return pc.newAllocation != nil }) {
			// Other pods may have been parked because of what this
			// attempt held; the echoes of its writes do not tell them
			// (see ownWrites). The own retry this counts as is not
			// one: this pod's cause stays.
			c.requeueUnschedulable(logger, "attempt released its allocations", klog.KObj(pod), key)
			eventsBefore++
		}
		if rollbackErr != nil {
			allocationAttempts.WithLabelValues(resultError).Inc()
			return errors.Join(err, rollbackErr)
		}
		if isRefused(err) {
			message := fmt.Sprintf("the API refused a write: %v", err)
			return c.reportUnschedulable(ctx, key, pod, eventsBefore, &decision{unschedulable: true, summary: message, details: message})
		}
		allocationAttempts.WithLabelValues(resultError).Inc()
		return err
	}
	done, err := c.writeClaims(ctx, key, pod, d)
	if err != nil {
		return fail(err)
	}
	wrote := len(done) > 0

	if pod.Spec.NodeName != "" {
		c.clearUnschedulable(key)
		if wrote {
			allocationAttempts.WithLabelValues(resultAllocated).Inc()
			logger.V(2).Info("Allocated claims for pod on its node", "node", pod.Spec.NodeName)
		}
		if condition := podCondition(pod, ConditionClaimsAllocated); condition != nil && condition.Status != corev1.ConditionTrue {
			// It said otherwise before.
			return c.setPodCondition(ctx, pod, ConditionClaimsAllocated, corev1.ConditionTrue, ReasonAllocated, "")
		}
		return nil
	}

	if bind, err := c.awaitBindingConditions(ctx, key, pod, d); !bind || err != nil {
		return err
	}
	if err := c.mode.Place(ctx, c.kubeClient, pod, d.node); err != nil {
		c.eventf(pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Binding to node %s: %v", d.node, err)
		return fail(err)
	}
	c.bound.add(pod.UID, d.node)
	if c.nodeRequests != nil {
		c.nodeRequests.assume(pod, d.node)
	}
	if pod.Status.NominatedNodeName != "" {
		// Placed: the nomination is over, wherever the pod went.
		if err := c.setNominatedNode(ctx, pod, ""); err != nil {
			logger.Error(err, "Clearing the nomination")
		}
	}
	c.bindingDone(pod, d)
	c.clearUnschedulable(key)
	allocationAttempts.WithLabelValues(resultPlaced).Inc()
	podsPlaced.Inc()
	podBindingLatency.Observe(time.Since(pod.CreationTimestamp.Time).Seconds())
	c.eventf(pod, corev1.EventTypeNormal, ReasonScheduled, "Successfully assigned %s to %s", klog.KObj(pod), d.node)
	logger.V(2).Info("Bound pod", "node", d.node)
	return nil
}

// writeClaims writes the decision's allocations and reservations for the
// pod and returns the claims it wrote, also when a write fails (those
// written before it).
func (c *Controller) writeClaims(ctx context.Context, key string, pod *corev1.Pod, d *decision) ([]*podClaim, error) {
	var done []*podClaim
	for _, pc := range d.claims {
		var err error
		switch {
		case pc.newAllocation != nil:
			err = c.writeAllocation(ctx, key, pod, pc)
		case podclaims.IsReservedForPod(pod, pc.claim) || podclaims.IsReservedFor(pc.claim, pc.consumer) || c.state.writtenFor(pc.claim.UID, pc.consumer.UID):
			continue
		default:
			err = c.reserveFor(ctx, key, pod, pc.claim, pc.consumer)
		}
		if err != nil {
			return done, err
		}
		done = append(done, pc)
	}
	return done, nil
}

// writeAllocation protects the claim with the finalizer unless it is
// already (a claim made for a pod carries it from its creation, so its
// allocation is a single write), then writes the allocation together
// with the reservation for its consumer (the pod, or its PodGroup). Nobody else can have reserved a claim that
// is not allocated, so one status update sets both; its resourceVersion
// makes sure that the claim was not allocated meanwhile. Conflicts
// caused by other changes are retried.
func (c *Controller) writeAllocation(ctx context.Context, key string, pod *corev1.Pod, pc *podClaim) error {
	claims := c.resourceClient.ResourceV1().ResourceClaims(pc.claim.Namespace)
	allocation := &resourcev1.AllocationResult{}
	if err := resourcev1.Convert_resource_AllocationResult_To_v1_AllocationResult(pc.newAllocation, allocation, nil); err != nil {
		c.state.drop(pc.claim.UID)
		return fmt.Errorf("convert allocation of claim %s: %w", klog.KObj(pc.claim), err)
	}
	claim := pc.claim
	baseVersion := claim.ResourceVersion
	refresh := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if refresh {
			fresh, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			claim = fresh
		}
		refresh = true
		switch {
		case claim.UID != pc.claim.UID:
			return fmt.Errorf("%w: claim %s was replaced", errClaimChanged, klog.KObj(claim))
		case claim.DeletionTimestamp != nil:
			return fmt.Errorf("%w: claim %s is being deleted", errClaimChanged, klog.KObj(claim))
		case claim.Status.Allocation != nil:
			return fmt.Errorf("%w: claim %s was allocated by someone else meanwhile", errClaimChanged, klog.KObj(claim))
		}
		if !slices.Contains(claim.Finalizers, c.finalizer) {
			claim = claim.DeepCopy()
			claim.Finalizers = append(claim.Finalizers, c.finalizer)
			baseVersion = claim.ResourceVersion
			updated, err := c.ownWrite(claim.UID, key, func() (*resourcev1.ResourceClaim, error) {
				return claims.Update(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
			})
			if err != nil {
				return err
			}
			claim = updated
		}
		claim = claim.DeepCopy()
		claim.Status.Allocation = allocation
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, pc.consumer)
		// A status update keeps the stored managedFields whatever it
		// carries: the copy's are not sent.
		claim.ManagedFields = nil
		baseVersion = claim.ResourceVersion
		updated, err := c.ownWrite(claim.UID, key, func() (*resourcev1.ResourceClaim, error) {
			return claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
		})
		if err != nil {
			return err
		}
		claim = updated
		return nil
	})
	if err != nil {
		if isDefinite(err) {
			c.state.drop(pc.claim.UID)
		} else {
			c.state.uncertain(pc.claim.UID, baseVersion)
		}
		return fmt.Errorf("allocate claim %s for pod %s: %w", klog.KObj(pc.claim), klog.KObj(pod), err)
	}
	c.state.written(claim.UID, claim.ResourceVersion)
	pc.claim = claim
	klog.FromContext(ctx).V(4).Info("Allocated claim", "claim", klog.KObj(claim), "devices", len(allocation.Devices.Results))
	return nil
}

// ownWrite runs a write of a claim for the pod with the given key, so
// that its echo is known as the controller's own (see ownWrites).
func (c *Controller) ownWrite(claim types.UID, key string, write func() (*resourcev1.ResourceClaim, error)) (*resourcev1.ResourceClaim, error) {
	c.ownWrites.begin(claim, key)
	updated, err := write()
	resourceVersion := ""
	if err == nil && updated != nil {
		resourceVersion = updated.ResourceVersion
	}
	c.ownWrites.end(claim, resourceVersion)
	return updated, err
}

// isRefused: the API will not take the write as it is. Asking again
// without a change gets the same answer.
func isRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

func podCondition(pod *corev1.Pod, conditionType corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == conditionType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// errClaimChanged: the claim cannot take the allocation any more.
var errClaimChanged = errors.New("claim changed")

// isDefinite: the server answered, so the write did not happen. Other
// errors (connection lost, timeout) leave that open.
func isDefinite(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) || errors.Is(err, errClaimChanged)
}

// reserveFor adds the consumer (the pod, or its PodGroup) to reservedFor
// of an allocated claim with a strategic merge patch: concurrent
// additions by others need no up-to-date copy and don't conflict; the
// server rejects the patch only when the result is invalid (too many
// consumers, not allocated) or the claim was replaced (uid).
func (c *Controller) reserveFor(ctx context.Context, key string, pod *corev1.Pod, claim *resourcev1.ResourceClaim, consumer resourcev1.ResourceClaimConsumerReference) error {
	patch := map[string]any{
		"metadata": map[string]any{"uid": claim.UID},
		"status": map[string]any{
			"reservedFor": []resourcev1.ResourceClaimConsumerReference{consumer},
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("reserve claim %s for pod %s: %w", klog.KObj(claim), klog.KObj(pod), err)
	}
	if _, err := c.ownWrite(claim.UID, key, func() (*resourcev1.ResourceClaim, error) {
		return c.resourceClient.ResourceV1().ResourceClaims(claim.Namespace).Patch(ctx, claim.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	}); err != nil {
		return fmt.Errorf("reserve claim %s for pod %s: %w", klog.KObj(claim), klog.KObj(pod), err)
	}
	klog.FromContext(ctx).V(4).Info("Reserved claim", "claim", klog.KObj(claim), "consumer", consumer.Resource+"/"+consumer.Name)
	return nil
}

// rollback undoes an attempt that could not finish: the pod (or its
// PodGroup) leaves reservedFor of the claims it was added to, and claims this attempt
// allocated are deallocated unless someone else uses them by now.
// Allocations that were not written yet are forgotten.
func (c *Controller) rollback(ctx context.Context, key string, pod *corev1.Pod, d *decision, done []*podClaim) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, pc := range d.claims {
		if pc.newAllocation != nil && !slices.Contains(done, pc) {
			// writeAllocation has settled it already on failure;
			// claims not attempted yet are only in the tracker.
			c.state.dropIfWriting(pc.claim.UID)
		}
	}
	for _, pc := range done {
		claims := c.resourceClient.ResourceV1().ResourceClaims(pc.claim.Namespace)
		deallocated := false
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			claim, err := claims.Get(ctx, pc.claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if claim.UID != pc.claim.UID {
				return nil
			}
			claim = claim.DeepCopy()
			remaining := slices.DeleteFunc(claim.Status.ReservedFor, func(consumer resourcev1.ResourceClaimConsumerReference) bool {
				return consumer.UID == pc.consumer.UID
			})
			removed := len(remaining) < len(claim.Status.ReservedFor)
			claim.Status.ReservedFor = remaining
			deallocated = pc.newAllocation != nil && len(remaining) == 0 && claim.Status.Allocation != nil
			if deallocated {
				claim.Status.Allocation = nil
			}
			if !removed && !deallocated {
				return nil
			}
			_, err = c.ownWrite(claim.UID, key, func() (*resourcev1.ResourceClaim, error) {
				return claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
			})
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
			c.state.drop(pc.claim.UID)
		case err != nil:
			// The allocation stays counted as pending, which is safe:
			// the retry of the pod finds it and uses it.
			errs = append(errs, fmt.Errorf("undo reservation of claim %s for pod %s: %w", klog.KObj(pc.claim), klog.KObj(pod), err))
		default:
			if deallocated {
				// Still allocated otherwise (someone else uses it):
				// the pending record stays until the informer has it.
				c.state.drop(pc.claim.UID)
			}
			logger.V(2).Info("Undid reservation", "claim", klog.KObj(pc.claim), "deallocated", deallocated)
		}
	}
	return errors.Join(errs...)
}
