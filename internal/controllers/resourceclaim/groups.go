package resourceclaim

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingapply "k8s.io/client-go/applyconfigurations/scheduling/v1beta1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

// PodGroup-level claims (KEP-5729), as upstream's resource claim
// controller handles them: a claim named by a template in a PodGroup's
// spec.resourceClaims is generated once for the group, owned by it and
// recorded in podgroup.status.resourceClaimStatuses; a pod whose claim
// equals the group's entry records the group's claim in its status
// instead of getting one of its own. The allocation controller reserves
// group claims for the PodGroup; this controller drops that reservation
// once no pod of the group uses the claim any more, which deallocates it,
// whether the PodGroup object still exists or not: a group deleted under
// running pods keeps their device, and a group whose pods are all gone
// releases it. Claims generated for a group that is gone are deleted
// once released (standalone runs no garbage collector).

const (
	// groupKeyPrefix marks work items of PodGroups.
	groupKeyPrefix = "podgroup:"

	// claimsByGroupIndex maps the UID of a PodGroup to the claims
	// generated for it (controller owner reference).
	claimsByGroupIndex = "claims-by-podgroup-owner"

	// Event reason on PodGroups.
	ReasonFailedGroupClaimCreation = "FailedResourceClaimCreation"
)

// addGroupHandlers watches PodGroups: their claims are generated, their
// pods learn the claims' names, and a deleted group's claims are released.
func (c *Controller) addGroupHandlers(logger klog.Logger, groups schedulinginformers.PodGroupInformer, podInformer cache.SharedIndexInformer, claimIndexer cache.Indexer) error {
	if err := podclaims.AddPodsByGroupIndex(podInformer); err != nil {
		return fmt.Errorf("add pod indexer: %w", err)
	}
	if err := claimIndexer.AddIndexers(cache.Indexers{claimsByGroupIndex: claimsByGroupIndexFunc}); err != nil {
		return fmt.Errorf("add claim indexer: %w", err)
	}
	c.podGroupLister = groups.Lister()
	c.podGroupsSynced = groups.Informer().HasSynced
	if _, err := groups.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueuePodGroup(logger, obj, false) },
		UpdateFunc: func(_, obj any) { c.enqueuePodGroup(logger, obj, false) },
		DeleteFunc: func(obj any) { c.enqueuePodGroup(logger, obj, true) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return fmt.Errorf("add PodGroup event handler: %w", err)
	}
	return nil
}

// enqueuePodGroup: a group with claims may need them generated; its pods
// may now learn their names or, for a group that appeared, stop waiting
// for it; a deleted group's claims are released.
func (c *Controller) enqueuePodGroup(logger klog.Logger, obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	group, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		logger.Error(nil, "Unexpected object in PodGroup event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	if deleted {
		c.deletedPods.Add(group.UID)
		for _, entry := range group.Spec.ResourceClaims {
			if name, err := podclaims.GroupClaimName(group, &entry); err == nil && name != nil {
				c.queue.Add(claimKeyPrefix + group.Namespace + "/" + *name)
			}
		}
		owned, err := c.claimCache.ByIndex(claimsByGroupIndex, string(group.UID))
		if err != nil {
			logger.Error(err, "Listing claims of PodGroup from cache", "podGroup", klog.KObj(group))
		}
		for _, obj := range owned {
			if claim, ok := obj.(*resourcev1.ResourceClaim); ok {
				c.queue.Add(claimKeyPrefix + claim.Namespace + "/" + claim.Name)
			}
		}
		return
	}
	if len(group.Spec.ResourceClaims) > 0 && group.DeletionTimestamp == nil {
		c.queue.Add(groupKeyPrefix + group.Namespace + "/" + group.Name)
	}
	// Its pods also when it names no claims: they may have waited for
	// the group to exist.
	pods, err := c.podIndexer.ByIndex(podclaims.PodsByGroupIndex, group.Namespace+"/"+group.Name)
	if err != nil {
		logger.Error(err, "Listing pods of PodGroup from cache", "podGroup", klog.KObj(group))
		return
	}
	for _, pod := range pods {
		c.enqueuePod(logger, pod, false)
	}
}

// syncPodGroup generates the claims of the group's templates and records
// them in the group's status.
func (c *Controller) syncPodGroup(ctx context.Context, namespace, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podGroup", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)
	group, err := c.podGroupLister.PodGroups(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get PodGroup %s/%s from cache: %w", namespace, name, err)
	}
	if group.DeletionTimestamp != nil {
		return nil
	}
	generated := map[string]string{}
	statusOutdated := false
	var errs []error
	for i := range group.Spec.ResourceClaims {
		entry := &group.Spec.ResourceClaims[i]
		if entry.ResourceClaimTemplateName == nil {
			continue
		}
		claimName, missingInStatus, err := c.ensureGroupClaim(ctx, group, entry)
		if err != nil {
			if c.recorder != nil {
				c.recorder.Eventf(group, corev1.EventTypeWarning, ReasonFailedGroupClaimCreation, "PodGroup claim %s: %v", entry.Name, err)
			}
			errs = append(errs, fmt.Errorf("PodGroup claim %s: %w", entry.Name, err))
			continue
		}
		generated[entry.Name] = claimName
		statusOutdated = statusOutdated || missingInStatus
	}
	if statusOutdated {
		// Server-side apply of every generated claim of the group: an
		// entry this field manager stops naming would be removed.
		statuses := make([]*schedulingapply.PodGroupResourceClaimStatusApplyConfiguration, 0, len(generated))
		for _, entry := range group.Spec.ResourceClaims {
			if claimName, ok := generated[entry.Name]; ok {
				statuses = append(statuses, schedulingapply.PodGroupResourceClaimStatus().WithName(entry.Name).WithResourceClaimName(claimName))
			}
		}
		apply := schedulingapply.PodGroup(group.Name, group.Namespace).WithUID(group.UID).
			WithStatus(schedulingapply.PodGroupStatus().WithResourceClaimStatuses(statuses...))
		if _, err := c.kubeClient.SchedulingV1beta1().PodGroups(namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return errors.Join(append(errs, fmt.Errorf("record generated claims in PodGroup %s: %w", klog.KObj(group), err))...)
		}
		logger.V(4).Info("Recorded generated claims in PodGroup", "claims", generated)
	}
	return errors.Join(errs...)
}

// ensureGroupClaim makes sure the claim of one group entry with a
// template exists; it returns its name and whether the group's status
// still has to record it.
func (c *Controller) ensureGroupClaim(ctx context.Context, group *schedulingv1beta1.PodGroup, entry *schedulingv1beta1.PodGroupResourceClaim) (string, bool, error) {
	logger := klog.FromContext(ctx)
	if name, err := podclaims.GroupClaimName(group, entry); err == nil && name != nil {
		claim, err := c.cachedClaim(group.Namespace, *name)
		if err != nil {
			return "", false, err
		}
		if claim == nil {
			// As for pods: only the server can say it is gone.
			live, err := c.resourceClient.ResourceV1().ResourceClaims(group.Namespace).Get(ctx, *name, metav1.GetOptions{})
			switch {
			case err == nil:
				claim = live
				c.claimCache.Mutation(live)
			case !apierrors.IsNotFound(err):
				return "", false, fmt.Errorf("get claim %s/%s recorded in the PodGroup status: %w", group.Namespace, *name, err)
			}
		}
		if claim != nil && isForGroup(group, claim) {
			return claim.Name, false, nil
		}
		logger.V(4).Info("Claim recorded in PodGroup status is gone or not the group's, generating a new one", "claim", klog.KRef(group.Namespace, *name))
	}
	if claim, err := c.findGroupClaim(group, entry.Name); err != nil {
		return "", false, err
	} else if claim != nil {
		return claim.Name, true, nil
	}
	created, err := c.createFromTemplate(ctx, group.Namespace, *entry.ResourceClaimTemplateName, claimGenerateName(group.Name, entry.Name), groupOwnerReference(group), entry.Name)
	if err != nil {
		return "", false, err
	}
	return created.Name, true, nil
}

// findGroupClaim returns the oldest claim generated for the group entry
// that is not being deleted, or nil.
func (c *Controller) findGroupClaim(group *schedulingv1beta1.PodGroup, entryName string) (*resourcev1.ResourceClaim, error) {
	return c.findOwnedClaim(claimsByGroupIndex, group.UID, func(claim *resourcev1.ResourceClaim) bool {
		return claim.Annotations[resourceapi.PodClaimNameAnnotation] == entryName
	})
}

// podGroupOf returns the pod's PodGroup when group claims are acted on;
// waiting is set when the pod names a group that does not exist (yet):
// whether its claims are the group's is not known then. Its creation
// queues the pod.
func (c *Controller) podGroupOf(pod *corev1.Pod) (group *schedulingv1beta1.PodGroup, waiting error, err error) {
	name := podclaims.GroupOf(pod)
	if c.podGroupLister == nil || name == "" {
		return nil, nil, nil
	}
	group, err = c.podGroupLister.PodGroups(pod.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: PodGroup %s does not exist", errWaiting, name), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get PodGroup %s/%s from cache: %w", pod.Namespace, name, err)
	}
	return group, nil, nil
}

// groupClaimOfPod returns the name of the group's claim that the pod
// claim (with a template) uses, and whether it is a group claim at all.
// The claim generated for the group waits for the group's status to name
// it; the status update queues the pod.
func groupClaimOfPod(pod *corev1.Pod, group *schedulingv1beta1.PodGroup, podClaim podclaims.PodClaim) (string, bool, error) {
	entry := podclaims.GroupClaimFor(pod, group, podClaim)
	if entry == nil {
		return "", false, nil
	}
	name, err := podclaims.GroupClaimName(group, entry)
	switch {
	case errors.Is(err, podclaims.ErrClaimNotGenerated):
		return "", true, fmt.Errorf("%w: the claim of PodGroup %s is not generated yet", errWaiting, group.Name)
	case err != nil:
		return "", true, err
	case name == nil:
		return "", true, nil
	}
	return *name, true, nil
}

// groupUsesClaim decides whether the PodGroup named by a consumer
// reference still uses the claim: while any pod of the group that names
// the claim is not done, its device may be in use, whether the PodGroup
// itself still exists or not (KEP-5729 keeps a group's claim allocated
// while a pod of the group remains). A group without such pods gives the
// reservation up, which deallocates the claim; a member that comes back
// gets it allocated again. The informer's word that no such pod is left
// is checked with the server, as for pods: dropping the reservation of a
// member that is about to start would hand its device to someone else.
func (c *Controller) groupUsesClaim(ctx context.Context, claim *resourcev1.ResourceClaim, consumer resourcev1.ResourceClaimConsumerReference) (bool, error) {
	logger := klog.FromContext(ctx)
	cached, err := c.podIndexer.ByIndex(podclaims.PodsByClaimIndex, claim.Namespace+"/"+claim.Name)
	if err != nil {
		return false, fmt.Errorf("list pods of claim %s from cache: %w", klog.KObj(claim), err)
	}
	for _, obj := range cached {
		if pod, ok := obj.(*corev1.Pod); ok && isGroupMemberUsing(pod, consumer.Name, claim.Name) {
			return true, nil
		}
	}
	pods, err := c.kubeClient.CoreV1().Pods(claim.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list pods of namespace %s for the members of PodGroup %s: %w", claim.Namespace, consumer.Name, err)
	}
	for i := range pods.Items {
		if pod := &pods.Items[i]; isGroupMemberUsing(pod, consumer.Name, claim.Name) {
			logger.V(5).Info("PodGroup member known only to the server still uses the claim", "pod", klog.KObj(pod), "podGroup", klog.KRef(claim.Namespace, consumer.Name))
			return true, nil
		}
	}
	logger.V(5).Info("No pod of the PodGroup uses the claim any more", "podGroup", klog.KRef(claim.Namespace, consumer.Name))
	return false, nil
}

// isGroupMemberUsing: the pod belongs to the group, names the claim and
// is not done.
func isGroupMemberUsing(pod *corev1.Pod, group, claimName string) bool {
	if podclaims.GroupOf(pod) != group || podclaims.IsDone(pod) {
		return false
	}
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		if name, _, err := podclaims.ClaimName(pod, podClaim); err == nil && name != nil && *name == claimName {
			return true
		}
	}
	return false
}

// groupExists decides whether the PodGroup named by a consumer reference
// still exists as that instance; the informer's word that it does not is
// checked with the server, as for pods.
func (c *Controller) groupExists(ctx context.Context, namespace string, consumer resourcev1.ResourceClaimConsumerReference) (bool, error) {
	if c.deletedPods.Has(consumer.UID) {
		return false, nil
	}
	group, err := c.podGroupLister.PodGroups(namespace).Get(consumer.Name)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get PodGroup %s/%s from cache: %w", namespace, consumer.Name, err)
	case err == nil && group.UID == consumer.UID:
		return true, nil
	}
	group, err = c.kubeClient.SchedulingV1beta1().PodGroups(namespace).Get(ctx, consumer.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		klog.FromContext(ctx).V(5).Info("PodGroup is gone", "podGroup", klog.KRef(namespace, consumer.Name))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get PodGroup %s/%s: %w", namespace, consumer.Name, err)
	default:
		return group.UID == consumer.UID, nil
	}
}

// deleteIfGroupIsGone deletes an unreserved claim generated for a
// PodGroup that is gone or replaced.
func (c *Controller) deleteIfGroupIsGone(ctx context.Context, claim *resourcev1.ResourceClaim) error {
	groupName, owner := podclaims.OwningPodGroup(claim)
	if groupName == "" || c.podGroupLister == nil {
		return nil
	}
	exists, err := c.groupExists(ctx, claim.Namespace, resourcev1.ResourceClaimConsumerReference{Name: groupName, UID: owner.UID})
	if err != nil || exists {
		return err
	}
	uid := claim.UID
	err = c.resourceClient.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete claim %s generated for PodGroup %s: %w", klog.KObj(claim), klog.KRef(claim.Namespace, groupName), err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted claim generated for a PodGroup that is gone", "podGroup", klog.KRef(claim.Namespace, groupName))
	return nil
}

// isForGroup: the claim was generated for this PodGroup instance.
func isForGroup(group *schedulingv1beta1.PodGroup, claim *resourcev1.ResourceClaim) bool {
	name, owner := podclaims.OwningPodGroup(claim)
	return name == group.Name && owner.UID == group.UID
}

// groupOwnerReference makes the PodGroup the controller of a claim made
// for it, as upstream: the claim goes with the group.
func groupOwnerReference(group *schedulingv1beta1.PodGroup) metav1.OwnerReference {
	isTrue := true
	return metav1.OwnerReference{
		APIVersion:         schedulingv1beta1.SchemeGroupVersion.String(),
		Kind:               "PodGroup",
		Name:               group.Name,
		UID:                group.UID,
		Controller:         &isTrue,
		BlockOwnerDeletion: &isTrue,
	}
}

// claimsByGroupIndexFunc indexes claims by the UID of the PodGroup they
// were generated for.
func claimsByGroupIndexFunc(obj any) ([]string, error) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, nil
	}
	name, owner := podclaims.OwningPodGroup(claim)
	if name == "" {
		return nil, nil
	}
	return []string{string(owner.UID)}, nil
}

// consumerString names a consumer for messages: "pod ns/name" or
// "PodGroup ns/name".
func consumerString(namespace string, consumer resourcev1.ResourceClaimConsumerReference) string {
	kind := "pod"
	if podclaims.IsGroupConsumer(consumer) {
		kind = "PodGroup"
	}
	return kind + " " + klog.KRef(namespace, consumer.Name).String()
}
