// Package resourceclaim is the resource claim controller. It generates a
// ResourceClaim from a ResourceClaimTemplate for each pod claim that names
// one, records the generated names in the pod status, reserves allocated
// claims for pods that were created with spec.nodeName already set (when
// the allocation is for that node by name; anything else is left to the
// allocation controller, which knows the nodes), and cleans up after
// pods: it removes them from status.reservedFor when they are done or
// gone, deallocates claims that nobody uses any more and deletes the
// claims that were generated for them. In standalone mode it also makes
// the claim for a pod's extended resources that DeviceClasses back
// (extended.go).
//
// It never allocates: that is the allocation controller's job.
package resourceclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
	"github.com/draplane/draplane/internal/worker"
)

const (
	// ControllerName is used for logging, the work queue and as event
	// source.
	ControllerName = "resourceclaim-controller"

	// FieldManager owns the pod status entries that this controller
	// writes with server-side apply.
	FieldManager = "draplane-resourceclaim-controller"

	// Event reasons on pods.
	ReasonFailedClaimCreation    = "FailedResourceClaimCreation"
	ReasonFailedClaimReservation = "FailedResourceClaimReservation"
	ReasonFailedPodStatusUpdate  = "FailedPodResourceClaimStatusUpdate"

	podKeyPrefix   = "pod:"
	claimKeyPrefix = "claim:"

	// podsByTemplateIndex maps "<namespace>/<template name>" to the pods
	// whose claims are generated from that template.
	podsByTemplateIndex = "pods-by-template"

	// claimsByPodIndex maps the UID of a pod to the claims generated for
	// it (controller owner reference).
	claimsByPodIndex = "claims-by-pod-owner"

	// mutationCacheTTL is long: the informer normally catches up within
	// moments and then replaces the entry.
	mutationCacheTTL = time.Hour
	// mutationCacheSize is how many created claims the cache remembers.
	mutationCacheSize = 10000

	// deletedPodsCacheSize bounds the memory of pods known to be deleted.
	deletedPodsCacheSize = 1000
)

// Controller is the resource claim controller. Create it with
// NewController, start it with Run.
type Controller struct {
	// mode says how generated claims are recorded in pods.
	mode           podmode.Mode
	kubeClient     kubernetes.Interface
	resourceClient versioned.Interface

	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	podsSynced cache.InformerSynced

	claimLister  resourcelisters.ResourceClaimLister
	claimsSynced cache.InformerSynced
	// claimCache is the claim informer's store plus the claims that this
	// controller created and the informer has not delivered yet. Without
	// it, a retry after a failed pod status write could create a second
	// claim for the same pod claim.
	claimCache cache.MutationCache

	templateLister  resourcelisters.ResourceClaimTemplateLister
	templatesSynced cache.InformerSynced

	// classLister is set when the controller makes claims for pods'
	// extended resources (Options.Classes).
	classLister   resourcelisters.DeviceClassLister
	classesSynced cache.InformerSynced

	// namespacesSynced is set when namespace events are handled.
	namespacesSynced cache.InformerSynced

	// podGroupLister is set when PodGroup-level claims are acted on
	// (Options.PodGroups, groups.go).
	podGroupLister  schedulinglisters.PodGroupLister
	podGroupsSynced cache.InformerSynced

	// recorder is set by Run (tests that call sync directly set their
	// own); nil drops events.
	recorder record.EventRecorder

	queue workqueue.TypedRateLimitingInterface[string]

	// deletedPods remembers pods (and PodGroups) the informer reported
	// as deleted, so that their reservations can be dropped without
	// asking the server.
	deletedPods *uidSet

	// extendedOnly: the controller only makes the claims of unbound
	// pods' extended resources (Options.ExtendedResourcesOnly).
	extendedOnly bool
}

// Options tune the controller. The zero value is standalone mode.
type Options struct {
	// Mode says where generated claims are recorded in a pod;
	// podmode.Standalone when nil.
	Mode podmode.Mode
	// Namespaces, when set, brings back the pods of a namespace whose
	// admin access label changed: a claim the API refused to generate
	// for lack of it may be accepted now.
	Namespaces coreinformers.NamespaceInformer
	// Classes, when set, makes the controller create the claim for a
	// pod's extended resources that DeviceClasses back (standalone
	// mode: host pods get theirs from the host's scheduler).
	Classes resourceinformers.DeviceClassInformer
	// PodGroups, when set and DRAWorkloadResourceClaims is on, makes the
	// controller generate the claims of PodGroups' spec.resourceClaims
	// and give them to the group's pods (groups.go).
	PodGroups schedulinginformers.PodGroupInformer
	// ExtendedResourcesOnly limits the controller to the claims for the
	// extended resources of the pods that Mode says are ours and that
	// are not bound yet (cluster mode, with Classes): a host cluster's
	// kube-controller-manager generates claims from templates, releases
	// and deletes claims, and would do all of that twice beside this
	// one. Such a claim is created without a finalizer, as kube-scheduler
	// creates it; the allocation controller adds upstream's when it
	// allocates. The template informer may be nil.
	ExtendedResourcesOnly bool
}

// NewController wires event handlers and indexers into the informers, so
// it must be called before the informers start. It starts nothing: start
// the informer factories, then call Run.
func NewController(
	logger klog.Logger,
	kubeClient kubernetes.Interface,
	resourceClient versioned.Interface,
	podInformer coreinformers.PodInformer,
	claimInformer resourceinformers.ResourceClaimInformer,
	templateInformer resourceinformers.ResourceClaimTemplateInformer,
) (*Controller, error) {
	return NewControllerWithOptions(logger, kubeClient, resourceClient, podInformer, claimInformer, templateInformer, Options{})
}

// NewControllerWithOptions is NewController with options.
func NewControllerWithOptions(
	logger klog.Logger,
	kubeClient kubernetes.Interface,
	resourceClient versioned.Interface,
	podInformer coreinformers.PodInformer,
	claimInformer resourceinformers.ResourceClaimInformer,
	templateInformer resourceinformers.ResourceClaimTemplateInformer,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		mode:           podmode.OrStandalone(opts.Mode),
		kubeClient:     kubeClient,
		resourceClient: resourceClient,
		podLister:      podInformer.Lister(),
		podIndexer:     podInformer.Informer().GetIndexer(),
		podsSynced:     podInformer.Informer().HasSynced,
		claimLister:    claimInformer.Lister(),
		claimsSynced:   claimInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "resource_claim"},
		),
		deletedPods:  newUIDSet(deletedPodsCacheSize),
		extendedOnly: opts.ExtendedResourcesOnly,
	}
	if templateInformer != nil {
		c.templateLister = templateInformer.Lister()
		c.templatesSynced = templateInformer.Informer().HasSynced
	}

	if err := podclaims.AddPodsByClaimIndex(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("add pod indexer: %w", err)
	}
	if err := c.podIndexer.AddIndexers(cache.Indexers{podsByTemplateIndex: podsByTemplateIndexFunc}); err != nil {
		return nil, fmt.Errorf("add pod indexer: %w", err)
	}
	claimIndexer := claimInformer.Informer().GetIndexer()
	if err := claimIndexer.AddIndexers(cache.Indexers{claimsByPodIndex: claimsByPodIndexFunc}); err != nil {
		return nil, fmt.Errorf("add claim indexer: %w", err)
	}
	// includeAdds: claims that the informer has not seen yet are exactly
	// what this cache is for.
	// The size bounds how many created claims may be outstanding (not yet
	// seen by the informer) at once; the default of 100 is less than a
	// burst of pods creates.
	c.claimCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, claimIndexer, cache.MutationCacheOptions{
		Indexer:      claimIndexer,
		TTL:          mutationCacheTTL,
		IncludeAdds:  true,
		MaxCacheSize: mutationCacheSize,
	})

	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueuePod(logger, obj, false) },
		UpdateFunc: func(_, obj any) { c.enqueuePod(logger, obj, false) },
		DeleteFunc: func(obj any) { c.enqueuePod(logger, obj, true) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	if _, err := claimInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueClaim(logger, obj, false) },
		UpdateFunc: func(_, obj any) { c.enqueueClaim(logger, obj, false) },
		DeleteFunc: func(obj any) { c.enqueueClaim(logger, obj, true) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("add claim event handler: %w", err)
	}

	if templateInformer != nil {
		if err := c.addWaitingPodHandlers(logger, templateInformer, opts.Namespaces); err != nil {
			return nil, err
		}
	}
	if opts.Classes != nil {
		if err := c.addExtendedResourceHandlers(logger, opts.Classes); err != nil {
			return nil, err
		}
	}
	if opts.PodGroups != nil && podclaims.GroupClaimsEnabled() {
		if err := c.addGroupHandlers(logger, opts.PodGroups, podInformer.Informer(), claimIndexer); err != nil {
			return nil, err
		}
	}

	setupMetrics(c.claimLister)
	return c, nil
}

// addWaitingPodHandlers brings back the pods that wait for a template or
// their namespace: a template that appears (or changes) after its pods
// were created gives them work at once, instead of when their backoff
// fires; so does a namespace whose admin access label changed.
func (c *Controller) addWaitingPodHandlers(logger klog.Logger, templateInformer resourceinformers.ResourceClaimTemplateInformer, namespaces coreinformers.NamespaceInformer) error {
	if _, err := templateInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueTemplatePods(logger, obj) },
		UpdateFunc: func(_, obj any) { c.enqueueTemplatePods(logger, obj) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return fmt.Errorf("add template event handler: %w", err)
	}
	if namespaces == nil {
		return nil
	}
	if _, err := namespaces.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) { c.onNamespaceUpdate(logger, oldObj, obj) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return fmt.Errorf("add namespace event handler: %w", err)
	}
	c.namespacesSynced = namespaces.Informer().HasSynced
	return nil
}

// Run waits for the informers, runs workers until ctx is done and then
// shuts the queue down. It blocks.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)

	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName, "workers", workers)
	defer logger.Info("Shutting down controller", "controller", ControllerName)

	recorder, stopRecording := worker.StartRecorder(ctx, c.kubeClient, scheme.Scheme, ControllerName, 1)
	defer stopRecording()
	c.recorder = recorder

	synced := []cache.InformerSynced{c.podsSynced, c.claimsSynced}
	if c.templatesSynced != nil {
		synced = append(synced, c.templatesSynced)
	}
	if c.namespacesSynced != nil {
		synced = append(synced, c.namespacesSynced)
	}
	if c.classesSynced != nil {
		synced = append(synced, c.classesSynced)
	}
	if c.podGroupsSynced != nil {
		synced = append(synced, c.podGroupsSynced)
	}
	worker.Run(ctx, c.queue, workers, c.handle, synced...)
}

// handle syncs one work item: errors that retrying cannot fix drop it,
// others retry it with backoff.
func (c *Controller) handle(ctx context.Context, key string) {
	err := c.sync(ctx, key)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, errPermanent):
		klog.FromContext(ctx).Error(err, "Dropping work item, retrying cannot help", "key", key)
		c.queue.Forget(key)
	case errors.Is(err, errWaiting):
		// Retrying now would be refused again: an event of the
		// template, the namespace or the pod brings the item back.
		klog.FromContext(ctx).V(3).Info("Waiting for a change", "key", key, "reason", err)
		c.queue.Forget(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "key", key)
		c.queue.AddRateLimited(key)
	}
}

// errPermanent marks errors that retrying cannot fix.
var errPermanent = errors.New("permanent error")

// errWaiting marks errors that only a change of the template, the pod or
// its namespace can fix: the template does not exist (yet), or the API
// refused the claim generated from it. Each of those changes queues the
// pod again, so it is not retried meanwhile.
var errWaiting = errors.New("waiting for the template, the pod or its namespace to change")

// sync handles one work item: "pod:<namespace>/<name>",
// "claim:<namespace>/<name>" or "podgroup:<namespace>/<name>".
func (c *Controller) sync(ctx context.Context, key string) error {
	prefix, objectKey, found := strings.Cut(key, ":")
	if !found {
		return fmt.Errorf("%w: work item %q has no prefix", errPermanent, key)
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(objectKey)
	if err != nil {
		return fmt.Errorf("%w: work item %q: %w", errPermanent, key, err)
	}
	switch prefix + ":" {
	case podKeyPrefix:
		return c.syncPod(ctx, namespace, name)
	case claimKeyPrefix:
		return c.syncClaim(ctx, namespace, name)
	case groupKeyPrefix:
		if c.podGroupLister == nil {
			return nil
		}
		return c.syncPodGroup(ctx, namespace, name)
	default:
		return fmt.Errorf("%w: work item %q has an unknown prefix", errPermanent, key)
	}
}

// enqueuePod decides from the caches alone what a pod change means: its
// claims may need cleanup when it is done or gone, and the pod itself
// may need claims generated or reserved.
func (c *Controller) enqueuePod(logger klog.Logger, obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		logger.Error(nil, "Unexpected object in pod event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	if !c.hasClaimWork(pod) {
		return
	}
	if c.extendedOnly {
		if !deleted && c.extendedResourceClaimNeeded(pod) {
			logger.V(6).Info("Enqueueing pod for its extended resources", "pod", klog.KObj(pod))
			c.queue.Add(podKeyPrefix + pod.Namespace + "/" + pod.Name)
		}
		return
	}

	if deleted {
		c.deletedPods.Add(pod.UID)
	}
	if deleted || podclaims.IsDone(pod) {
		// The pod's claims may have to drop the pod from reservedFor,
		// and generated claims have to go.
		for _, podClaim := range podclaims.ClaimsOf(pod) {
			name, _, err := podclaims.ClaimName(pod, podClaim)
			if err != nil || name == nil {
				continue
			}
			c.queue.Add(claimKeyPrefix + pod.Namespace + "/" + *name)
		}
		// Also claims generated for the pod that its status doesn't
		// name because the status write failed.
		owned, err := c.claimCache.ByIndex(claimsByPodIndex, string(pod.UID))
		if err != nil {
			logger.Error(err, "Listing claims of pod from cache", "pod", klog.KObj(pod))
		}
		for _, obj := range owned {
			if claim, ok := obj.(*resourcev1.ResourceClaim); ok {
				c.queue.Add(claimKeyPrefix + claim.Namespace + "/" + claim.Name)
			}
		}
		logger.V(6).Info("Pod done or gone, checking its claims", "pod", klog.KObj(pod), "deleted", deleted)
		return
	}

	if needsWork, reason := c.podNeedsWork(pod); needsWork {
		logger.V(6).Info("Enqueueing pod", "pod", klog.KObj(pod), "reason", reason)
		c.queue.Add(podKeyPrefix + pod.Namespace + "/" + pod.Name)
	}
}

// podNeedsWork checks, with the caches only, whether syncPod would do
// anything for a pod that still needs its claims.
func (c *Controller) podNeedsWork(pod *corev1.Pod) (bool, string) {
	if pod.DeletionTimestamp != nil {
		return false, "pod is being deleted"
	}
	if c.extendedResourceClaimMissing(pod) {
		return true, "claim for extended resources is missing"
	}
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		name, mustCheckOwner, err := podclaims.ClaimName(pod, podClaim)
		if errors.Is(err, podclaims.ErrUnsupportedPodClaim) {
			continue
		}
		if err != nil {
			return true, err.Error()
		}
		if name == nil {
			continue
		}
		claim, err := c.cachedClaim(pod.Namespace, *name)
		if err != nil {
			return true, err.Error()
		}
		if claim == nil {
			if podClaim.TemplateName != nil || podClaim.ExtendedResources {
				return true, "generated claim is missing"
			}
			// Someone else has to create it.
			continue
		}
		if mustCheckOwner && podclaims.IsForPod(pod, claim) != nil {
			return true, "claim in pod status is not owned by the pod"
		}
		if pod.Spec.NodeName != "" && needsReservation(pod, claim) {
			return true, "allocated claim must be reserved for pod bound to node"
		}
	}
	return false, "nothing to do"
}

// enqueueClaim queues the claim itself (reservedFor may name pods that
// are gone) and every known pod that uses it (a claim that appears,
// vanishes or gets allocated may give the pod work).
func (c *Controller) enqueueClaim(logger klog.Logger, obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		logger.Error(nil, "Unexpected object in claim event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	if deleted {
		c.claimCache.OnDelete(claim)
	} else {
		c.claimCache.OnAddOrUpdate(claim)
		if !c.extendedOnly {
			c.queue.Add(claimKeyPrefix + claim.Namespace + "/" + claim.Name)
		}
	}

	pods, err := c.podIndexer.ByIndex(podclaims.PodsByClaimIndex, claim.Namespace+"/"+claim.Name)
	if err != nil {
		logger.Error(err, "Listing pods of claim from cache", "claim", klog.KObj(claim))
		return
	}
	for _, pod := range pods {
		c.enqueuePod(logger, pod, false)
	}
}

// syncPod generates the missing claims of a pod, records them in its
// status and, for a pod that is already bound to a node, reserves its
// allocated claims for it.
func (c *Controller) syncPod(ctx context.Context, namespace, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)

	pod, err := c.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(5).Info("Pod is gone, nothing to do")
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s/%s from cache: %w", namespace, name, err)
	}
	if pod.DeletionTimestamp != nil || podclaims.IsDone(pod) {
		// Generating claims now would only produce garbage.
		logger.V(5).Info("Pod will not run, nothing to do")
		return nil
	}
	if c.extendedOnly {
		if pod.Spec.NodeName != "" || !podmode.Ours(c.mode, pod) {
			return nil
		}
		return c.syncExtendedResourceClaim(ctx, pod)
	}

	// errs need a retry; waiting are the pod claims that wait for a
	// change of the template, the pod or the namespace.
	var errs, waiting []error
	// generated maps each pod claim with a template to its claim, for
	// the status; statusOutdated is set when that differs from the
	// pod's status.
	generated := make(map[string]string)
	statusOutdated := false
	group, groupWaiting, err := c.podGroupOf(pod)
	if err != nil {
		return err
	}
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		if podClaim.TemplateName == nil {
			if podClaim.ClaimName == nil && !podClaim.ExtendedResources {
				// Retrying cannot help; the other pod claims still
				// get their claims.
				logger.Error(podclaims.ErrUnsupportedPodClaim, "Skipping pod claim", "podClaim", podClaim.Name)
			}
			continue
		}
		if groupWaiting != nil {
			waiting = append(waiting, fmt.Errorf("pod claim %s: %w", podClaim.Name, groupWaiting))
			continue
		}
		if claimName, isGroupClaim, err := groupClaimOfPod(pod, group, podClaim); isGroupClaim {
			// The group's claim, not one of the pod's own.
			switch {
			case errors.Is(err, errWaiting):
				waiting = append(waiting, fmt.Errorf("pod claim %s: %w", podClaim.Name, err))
			case err != nil:
				errs = append(errs, fmt.Errorf("pod claim %s: %w", podClaim.Name, err))
			case claimName != "":
				generated[podClaim.Name] = claimName
				recorded, ok := podclaims.StatusOf(pod)[podClaim.Name]
				statusOutdated = statusOutdated || !ok || recorded == nil || *recorded != claimName
			}
			continue
		}
		claimName, missingInStatus, err := c.ensureGeneratedClaim(ctx, pod, podClaim)
		if err != nil {
			c.eventf(pod, corev1.EventTypeWarning, ReasonFailedClaimCreation, "Pod claim %s: %v", podClaim.Name, err)
			if errors.Is(err, errWaiting) {
				waiting = append(waiting, fmt.Errorf("pod claim %s: %w", podClaim.Name, err))
			} else {
				errs = append(errs, fmt.Errorf("pod claim %s: %w", podClaim.Name, err))
			}
			continue
		}
		if claimName != "" {
			generated[podClaim.Name] = claimName
		}
		statusOutdated = statusOutdated || missingInStatus
	}

	if statusOutdated {
		if err := c.applyPodClaimStatuses(ctx, pod, generated); err != nil {
			c.eventf(pod, corev1.EventTypeWarning, ReasonFailedPodStatusUpdate, "Recording generated ResourceClaims: %v", err)
			return errors.Join(append(errs, err)...)
		}
	}
	if err := c.syncExtendedResourceClaim(ctx, pod); errors.Is(err, errWaiting) {
		waiting = append(waiting, err)
	} else if err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		// Claims that exist may be reserved even while others wait.
		if err := c.reserveIfBound(ctx, pod, generated); err != nil {
			errs = append(errs, err)
		}
	}
	return syncResult(errs, waiting)
}

// syncResult is what a sync returns after errs, which need a retry, and
// waiting, which wait for a change.
func syncResult(errs, waiting []error) error {
	switch {
	case len(errs) > 0 && len(waiting) > 0:
		// Retried: the waiting ones are only mentioned, so that the
		// error does not count as waiting.
		return fmt.Errorf("%w; also %v", errors.Join(errs...), errors.Join(waiting...))
	case len(errs) > 0:
		return errors.Join(errs...)
	default:
		return errors.Join(waiting...)
	}
}

// reserveIfBound reserves the allocated claims of a pod that is bound to a
// node already.
func (c *Controller) reserveIfBound(ctx context.Context, pod *corev1.Pod, generated map[string]string) error {
	if pod.Spec.NodeName == "" {
		// Not bound yet: the allocation controller reserves when it
		// allocates.
		return nil
	}
	return c.reserveForBoundPod(ctx, pod, generated)
}

// ensureGeneratedClaim makes sure that the claim for one pod claim with a
// template exists. It returns the claim's name ("" when the pod status
// says that no claim is needed) and whether the pod status still has to
// record it.
func (c *Controller) ensureGeneratedClaim(ctx context.Context, pod *corev1.Pod, podClaim podclaims.PodClaim) (string, bool, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podClaim", podClaim.Name)

	name, _, err := podclaims.ClaimName(pod, podClaim)
	switch {
	case errors.Is(err, podclaims.ErrClaimNotGenerated):
		// Find or create below.
	case err != nil:
		return "", false, err
	case name == nil:
		return "", false, nil
	default:
		claim, err := c.cachedClaim(pod.Namespace, *name)
		if err != nil {
			return "", false, err
		}
		if claim != nil {
			if err := podclaims.IsForPod(pod, claim); err != nil {
				logger.Error(err, "Claim recorded in pod status belongs to someone else, generating a new one", "claim", klog.KObj(claim))
			} else {
				return claim.Name, false, nil
			}
		} else {
			// The caches can lag behind the pod status that named the
			// claim (the claim watch is slower than the pod watch, or
			// the created claim left the mutation cache). Only the
			// server can say the claim is really gone; recreating it on
			// the caches' word would give the pod claim a second claim.
			live, err := c.resourceClient.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
			switch {
			case err == nil:
				if err := podclaims.IsForPod(pod, live); err != nil {
					logger.Error(err, "Claim recorded in pod status belongs to someone else, generating a new one", "claim", klog.KObj(live))
				} else {
					c.claimCache.Mutation(live)
					return live.Name, false, nil
				}
			case apierrors.IsNotFound(err):
				logger.V(4).Info("Claim recorded in pod status is gone, generating a new one", "claim", klog.KRef(pod.Namespace, *name))
			default:
				return "", false, fmt.Errorf("get claim %s/%s recorded in the pod status: %w", pod.Namespace, *name, err)
			}
		}
	}

	// A claim generated earlier whose name didn't make it into the
	// status: adopt it instead of creating another one.
	if claim, err := c.findGeneratedClaim(pod, podClaim.Name); err != nil {
		return "", false, err
	} else if claim != nil {
		logger.V(4).Info("Found claim generated earlier", "claim", klog.KObj(claim))
		return claim.Name, true, nil
	}

	created, err := c.createFromTemplate(ctx, pod.Namespace, *podClaim.TemplateName, claimGenerateName(pod.Name, podClaim.Name), podOwnerReference(pod), podClaim.Name)
	if err != nil {
		return "", false, err
	}
	return created.Name, true, nil
}

// createFromTemplate creates the claim for one pod (or PodGroup) claim
// from its template. A missing template (its creation queues the pod or
// group) and a claim the API refuses as the template describes it (admin
// access without the namespace label, for example: asking again gets the
// same answer until something changes) are errWaiting.
func (c *Controller) createFromTemplate(ctx context.Context, namespace, templateName, generateName string, owner metav1.OwnerReference, podClaimName string) (*resourcev1.ResourceClaim, error) {
	template, err := c.templateLister.ResourceClaimTemplates(namespace).Get(templateName)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: get ResourceClaimTemplate %s: %w", errWaiting, templateName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("get ResourceClaimTemplate %s: %w", templateName, err)
	}
	claim := newClaimFromTemplate(generateName, namespace, owner, podClaimName, template)
	created, err := c.resourceClient.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		claimCreates.WithLabelValues(createFailure).Inc()
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return nil, fmt.Errorf("%w: create ResourceClaim from template %s refused: %w", errWaiting, template.Name, err)
		}
		return nil, fmt.Errorf("create ResourceClaim from template %s: %w", template.Name, err)
	}
	claimCreates.WithLabelValues(createSuccess).Inc()
	c.claimCache.Mutation(created)
	klog.FromContext(ctx).V(2).Info("Created ResourceClaim", "claim", klog.KObj(created), "template", klog.KObj(template), "owner", owner.Kind+"/"+owner.Name)
	return created, nil
}

// newClaimFromTemplate builds the claim for one pod (or PodGroup) claim:
// the template's labels, annotations and spec, our annotation and a
// controller owner reference, which together identify the pod claim it
// was made for. It carries the delete protection from the start (see
// generatedClaimFinalizers).
func newClaimFromTemplate(generateName, namespace string, owner metav1.OwnerReference, podClaimName string, template *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaim {
	annotations := make(map[string]string, len(template.Spec.Annotations)+1)
	for key, value := range template.Spec.Annotations {
		annotations[key] = value
	}
	annotations[resourceapi.PodClaimNameAnnotation] = podClaimName
	var labels map[string]string
	if len(template.Spec.Labels) > 0 {
		labels = make(map[string]string, len(template.Spec.Labels))
		for key, value := range template.Spec.Labels {
			labels[key] = value
		}
	}
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    generateName,
			Namespace:       namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
			Finalizers:      generatedClaimFinalizers(),
		},
		Spec: *template.Spec.Spec.DeepCopy(),
	}
}

// generatedClaimFinalizers are the finalizers of a claim made for a pod.
// Upstream's scheduler adds the delete protection with an update of its
// own just before it writes the allocation. A claim made for a pod is
// made to be allocated, so it carries the protection from its creation:
// allocating it takes one write (the status) instead of two, and that
// write does not conflict with a cache that has not seen the finalizer
// yet. A claim deleted before it was allocated loses the finalizer in
// syncClaim; one that is released loses it once it is deallocated, as
// upstream's.
func generatedClaimFinalizers() []string {
	return []string{resourceapi.Finalizer}
}

// podOwnerReference makes the pod the controller of a claim made for it,
// so that the claim goes with the pod.
func podOwnerReference(pod *corev1.Pod) metav1.OwnerReference {
	isTrue := true
	return metav1.OwnerReference{
		APIVersion:         "v1",
		Kind:               "Pod",
		Name:               pod.Name,
		UID:                pod.UID,
		Controller:         &isTrue,
		BlockOwnerDeletion: &isTrue,
	}
}

// findGeneratedClaim returns a claim owned by the pod that was generated
// for the pod claim, or nil.
func (c *Controller) findGeneratedClaim(pod *corev1.Pod, podClaimName string) (*resourcev1.ResourceClaim, error) {
	return c.findClaimOfPod(pod, func(claim *resourcev1.ResourceClaim) bool {
		return claim.Annotations[resourceapi.PodClaimNameAnnotation] == podClaimName
	})
}

// findClaimOfPod returns the oldest claim owned by the pod, not being
// deleted, that matches, or nil.
func (c *Controller) findClaimOfPod(pod *corev1.Pod, matches func(*resourcev1.ResourceClaim) bool) (*resourcev1.ResourceClaim, error) {
	return c.findOwnedClaim(claimsByPodIndex, pod.UID, matches)
}

// findOwnedClaim returns the oldest claim that the owner index maps the
// owner's UID to, not being deleted, that matches, or nil.
func (c *Controller) findOwnedClaim(index string, owner types.UID, matches func(*resourcev1.ResourceClaim) bool) (*resourcev1.ResourceClaim, error) {
	objs, err := c.claimCache.ByIndex(index, string(owner))
	if err != nil {
		return nil, fmt.Errorf("list claims of owner %s from cache: %w", owner, err)
	}
	var found *resourcev1.ResourceClaim
	for _, obj := range objs {
		claim, ok := obj.(*resourcev1.ResourceClaim)
		if !ok || claim.DeletionTimestamp != nil || !matches(claim) {
			continue
		}
		// Take the oldest if there ever are several; the others get
		// deleted with their owner.
		if found == nil || claim.CreationTimestamp.Before(&found.CreationTimestamp) ||
			(claim.CreationTimestamp.Equal(&found.CreationTimestamp) && claim.Name < found.Name) {
			found = claim
		}
	}
	return found, nil
}

// applyPodClaimStatuses records the generated claims in the pod (the
// status, or an annotation for host pods: see podmode.Mode). It names
// every generated claim of the pod, not just the new ones: with
// server-side apply, an entry that this field manager stops naming would
// be removed.
func (c *Controller) applyPodClaimStatuses(ctx context.Context, pod *corev1.Pod, generated map[string]string) error {
	statuses := make([]corev1.PodResourceClaimStatus, 0, len(generated))
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		if claimName, ok := generated[podClaim.Name]; ok {
			statuses = append(statuses, corev1.PodResourceClaimStatus{Name: podClaim.Name, ResourceClaimName: &claimName})
		}
	}
	if err := c.mode.RecordGenerated(ctx, c.kubeClient, pod, statuses, FieldManager); err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Recorded generated claims in pod", "claims", generated)
	return nil
}

// reserveForBoundPod adds a pod that is already bound to a node to the
// reservedFor of each of its allocated claims, as the allocation
// controller would have done had it bound the pod.
func (c *Controller) reserveForBoundPod(ctx context.Context, pod *corev1.Pod, generated map[string]string) error {
	logger := klog.FromContext(ctx)
	group, _, err := c.podGroupOf(pod)
	if err != nil {
		return err
	}
	var errs []error
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		var claimName string
		switch {
		case podClaim.ClaimName != nil:
			claimName = *podClaim.ClaimName
		case podClaim.TemplateName != nil:
			claimName = generated[podClaim.Name]
		case podClaim.ExtendedResources:
			claimName = podclaims.ExtendedResourceClaimName(pod)
		}
		if claimName == "" {
			continue
		}
		claim, err := c.cachedClaim(pod.Namespace, claimName)
		if err != nil {
			return err
		}
		if claim == nil || !needsReservation(pod, claim) {
			// A missing claim or one that is not allocated yet comes
			// back through the claim event handler.
			continue
		}
		if (podClaim.TemplateName != nil || podClaim.ExtendedResources) && podclaims.IsForPod(pod, claim) != nil {
			continue
		}
		// A group claim is reserved for the group, as the allocation
		// controller does.
		consumer := podclaims.PodConsumer(pod)
		if podclaims.GroupClaimFor(pod, group, podClaim) != nil {
			consumer = podclaims.GroupConsumer(group)
		}
		if err := c.reserveFor(ctx, consumer, claim); err != nil {
			c.eventf(pod, corev1.EventTypeWarning, ReasonFailedClaimReservation, "Reserving ResourceClaim %s: %v", claim.Name, err)
			errs = append(errs, err)
			continue
		}
		logger.V(2).Info("Reserved claim for pod bound to node", "claim", klog.KObj(claim), "node", pod.Spec.NodeName, "consumer", consumer.Resource+"/"+consumer.Name)
	}
	return errors.Join(errs...)
}

// needsReservation: allocated for the pod's node, not being deleted (the
// server accepts no new consumers then), not reserved for this pod yet,
// and room for one more consumer.
func needsReservation(pod *corev1.Pod, claim *resourcev1.ResourceClaim) bool {
	return claim.Status.Allocation != nil &&
		claim.DeletionTimestamp == nil &&
		!podclaims.IsReservedForPod(pod, claim) &&
		len(claim.Status.ReservedFor) < resourceapi.ResourceClaimReservedForMaxSize &&
		allocatedForNode(claim.Status.Allocation, pod.Spec.NodeName)
}

// allocatedForNode: the allocation may be used on the node, as far as its
// name tells. A node selector on labels is not for this controller, which
// does not watch nodes, to judge: the allocation controller does, and
// reserves the claim itself when the node fits (and explains on the pod
// when it does not). Reserving a claim for a pod on a node the devices
// are not attached to would let the pod start without them.
func allocatedForNode(allocation *resourcev1.AllocationResult, nodeName string) bool {
	selector := allocation.NodeSelector
	if selector == nil {
		return true
	}
	for _, term := range selector.NodeSelectorTerms {
		if len(term.MatchExpressions) > 0 {
			return false
		}
	}
	return nodeaffinity.NodeSelectorMatches(selector, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
}

// reserveFor adds the consumer (a pod, or a PodGroup) to reservedFor with
// a strategic merge patch: concurrent additions by others need no
// up-to-date copy and don't conflict; the server rejects the patch only
// when the result is invalid (too many consumers) or the claim was
// replaced (uid).
func (c *Controller) reserveFor(ctx context.Context, consumer resourcev1.ResourceClaimConsumerReference, claim *resourcev1.ResourceClaim) error {
	patch := map[string]any{
		"metadata": map[string]any{"uid": claim.UID},
		"status": map[string]any{
			"reservedFor": []resourcev1.ResourceClaimConsumerReference{consumer},
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("reserve claim %s for %s: %w", klog.KObj(claim), consumerString(claim.Namespace, consumer), err)
	}
	if _, err := c.resourceClient.ResourceV1().ResourceClaims(claim.Namespace).Patch(ctx, claim.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager}, "status"); err != nil {
		return fmt.Errorf("reserve claim %s for %s: %w", klog.KObj(claim), consumerString(claim.Namespace, consumer), err)
	}
	return nil
}

// syncClaim drops consumers that are done or gone from reservedFor,
// deallocates a claim that nobody uses any more and deletes a claim that
// was generated for a pod that is done or gone.
func (c *Controller) syncClaim(ctx context.Context, namespace, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "claim", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)

	claim, err := c.claimLister.ResourceClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(5).Info("Claim is gone, nothing to do")
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s/%s from cache: %w", namespace, name, err)
	}

	remaining := make([]resourcev1.ResourceClaimConsumerReference, 0, len(claim.Status.ReservedFor))
	for _, consumer := range claim.Status.ReservedFor {
		if podclaims.IsGroupConsumer(consumer) && c.podGroupLister != nil {
			// A group claim is the group's while a pod of it uses it.
			needed, err := c.groupUsesClaim(ctx, claim, consumer)
			if err != nil {
				return err
			}
			if needed {
				remaining = append(remaining, consumer)
			}
			continue
		}
		if consumer.APIGroup != "" || consumer.Resource != "pods" {
			// Only pods (and PodGroups) are ours to judge; whoever
			// added another kind of consumer removes it.
			remaining = append(remaining, consumer)
			continue
		}
		needed, err := c.podNeedsClaim(ctx, namespace, consumer)
		if err != nil {
			return err
		}
		if needed {
			remaining = append(remaining, consumer)
		}
	}

	switch {
	case len(remaining) < len(claim.Status.ReservedFor):
		removed := len(claim.Status.ReservedFor) - len(remaining)
		claim = claim.DeepCopy()
		claim.Status.ReservedFor = remaining
		if len(remaining) == 0 {
			// The last consumer left: release the devices so that
			// the next consumer gets an allocation of its own, on
			// its own node. Deallocating on this transition only
			// leaves alone claims that were allocated and are
			// waiting for their first consumer.
			claim.Status.Allocation = nil
		}
		// An update, not a patch: it carries the resourceVersion that the
		// decision was made on, so a consumer added meanwhile makes it
		// fail with a conflict instead of being dropped.
		updated, err := c.resourceClient.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return fmt.Errorf("remove consumers from claim %s: %w", klog.KObj(claim), err)
		}
		logger.V(2).Info("Removed consumers from claim", "removed", removed, "remaining", len(remaining), "deallocated", len(remaining) == 0)
		claim = updated
		if len(remaining) == 0 {
			if claim, err = c.removeFinalizer(ctx, claim); err != nil {
				return err
			}
		}
	case len(remaining) == 0 && claim.DeletionTimestamp != nil && slices.Contains(claim.Finalizers, resourceapi.Finalizer):
		// Deleted while unused (or its consumers are gone already):
		// release the devices and let the deletion finish. This also
		// covers a claim made for a pod that was never allocated: it
		// carries the finalizer from its creation.
		if claim.Status.Allocation != nil {
			claim = claim.DeepCopy()
			claim.Status.Allocation = nil
			updated, err := c.resourceClient.ResourceV1().ResourceClaims(namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
			if err != nil {
				return fmt.Errorf("deallocate deleted claim %s: %w", klog.KObj(claim), err)
			}
			logger.V(2).Info("Deallocated deleted claim")
			claim = updated
		}
		if _, err := c.removeFinalizer(ctx, claim); err != nil {
			return err
		}
		return nil
	}

	if len(remaining) > 0 || claim.DeletionTimestamp != nil {
		return nil
	}
	if err := c.deleteIfGroupIsGone(ctx, claim); err != nil {
		return err
	}
	return c.deleteIfOwnerIsDone(ctx, claim)
}

// removeFinalizer drops the delete protection from a claim that is not
// allocated (every copy of it: a client that added it again to a claim
// made with it would otherwise keep the claim forever).
func (c *Controller) removeFinalizer(ctx context.Context, claim *resourcev1.ResourceClaim) (*resourcev1.ResourceClaim, error) {
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) || claim.Status.Allocation != nil {
		return claim, nil
	}
	claim = claim.DeepCopy()
	claim.Finalizers = slices.DeleteFunc(claim.Finalizers, func(finalizer string) bool { return finalizer == resourceapi.Finalizer })
	updated, err := c.resourceClient.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("remove finalizer from claim %s: %w", klog.KObj(claim), err)
	}
	klog.FromContext(ctx).V(4).Info("Removed finalizer from claim")
	return updated, nil
}

// deleteIfOwnerIsDone deletes a generated, unreserved claim whose pod is
// done, gone or replaced. Nobody else would: the standalone server runs
// no garbage collector, and a done pod may stay around for long.
func (c *Controller) deleteIfOwnerIsDone(ctx context.Context, claim *resourcev1.ResourceClaim) error {
	logger := klog.FromContext(ctx)
	podName, owner := podclaims.OwningPod(claim)
	if podName == "" {
		return nil
	}
	stillNeeded, err := c.podNeedsClaim(ctx, claim.Namespace, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: podName, UID: owner.UID})
	if err != nil {
		return err
	}
	if stillNeeded {
		return nil
	}
	uid := claim.UID
	err = c.resourceClient.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete claim %s generated for pod %s: %w", klog.KObj(claim), klog.KRef(claim.Namespace, podName), err)
	}
	logger.V(2).Info("Deleted claim generated for a pod that is done or gone", "pod", klog.KRef(claim.Namespace, podName))
	return nil
}

// podNeedsClaim decides whether the pod instance named by a consumer
// reference may still use the claim. A pod that the informer doesn't
// know (or knows only as another instance) is looked up on the server:
// the informer may simply lag behind, and dropping the reservation of a
// pod that is about to start would be wrong.
func (c *Controller) podNeedsClaim(ctx context.Context, namespace string, consumer resourcev1.ResourceClaimConsumerReference) (bool, error) {
	logger := klog.FromContext(ctx)
	if c.deletedPods.Has(consumer.UID) {
		logger.V(5).Info("Pod was deleted", "pod", klog.KRef(namespace, consumer.Name), "podUID", consumer.UID)
		return false, nil
	}
	pod, err := c.podLister.Pods(namespace).Get(consumer.Name)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get pod %s/%s from cache: %w", namespace, consumer.Name, err)
	case err == nil && pod.UID == consumer.UID:
		if podclaims.IsDone(pod) {
			logger.V(5).Info("Pod is done", "pod", klog.KObj(pod), "phase", pod.Status.Phase)
			return false, nil
		}
		return true, nil
	}

	pod, err = c.kubeClient.CoreV1().Pods(namespace).Get(ctx, consumer.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		logger.V(5).Info("Pod is gone", "pod", klog.KRef(namespace, consumer.Name), "podUID", consumer.UID)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get pod %s/%s: %w", namespace, consumer.Name, err)
	case pod.UID != consumer.UID:
		logger.V(5).Info("Pod was replaced", "pod", klog.KObj(pod), "podUID", consumer.UID, "currentUID", pod.UID)
		return false, nil
	case podclaims.IsDone(pod):
		logger.V(5).Info("Pod is done", "pod", klog.KObj(pod), "phase", pod.Status.Phase)
		return false, nil
	default:
		return true, nil
	}
}

// cachedClaim returns a claim from the informer or the mutation cache, or
// nil if neither has it.
func (c *Controller) cachedClaim(namespace, name string) (*resourcev1.ResourceClaim, error) {
	obj, exists, err := c.claimCache.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("get claim %s/%s from cache: %w", namespace, name, err)
	}
	if !exists {
		return nil, nil
	}
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, fmt.Errorf("claim cache returned %T for %s/%s", obj, namespace, name)
	}
	return claim, nil
}

func (c *Controller) eventf(pod *corev1.Pod, eventType, reason, messageFmt string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(pod, eventType, reason, messageFmt, args...)
	}
}

// enqueueTemplatePods queues the pods that generate claims from a
// template.
func (c *Controller) enqueueTemplatePods(logger klog.Logger, obj any) {
	template, ok := obj.(*resourcev1.ResourceClaimTemplate)
	if !ok {
		logger.Error(nil, "Unexpected object in template event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	pods, err := c.podIndexer.ByIndex(podsByTemplateIndex, template.Namespace+"/"+template.Name)
	if err != nil {
		logger.Error(err, "Listing pods of template from cache", "template", klog.KObj(template))
		return
	}
	for _, pod := range pods {
		c.enqueuePod(logger, pod, false)
	}
}

// onNamespaceUpdate: a namespace that gains or loses the admin access
// label may change whether its claims can be generated.
func (c *Controller) onNamespaceUpdate(logger klog.Logger, oldObj, obj any) {
	old, okOld := oldObj.(*corev1.Namespace)
	namespace, ok := obj.(*corev1.Namespace)
	if !okOld || !ok || old.Labels[resourceapi.AdminAccessNamespaceLabel] == namespace.Labels[resourceapi.AdminAccessNamespaceLabel] {
		return
	}
	pods, err := c.podIndexer.ByIndex(cache.NamespaceIndex, namespace.Name)
	if err != nil {
		logger.Error(err, "Listing pods of namespace from cache", "namespace", namespace.Name)
		return
	}
	for _, pod := range pods {
		c.enqueuePod(logger, pod, false)
	}
}

// podsByTemplateIndexFunc indexes pods by the templates they generate
// claims from.
func podsByTemplateIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		if podClaim.TemplateName != nil {
			keys = append(keys, pod.Namespace+"/"+*podClaim.TemplateName)
		}
	}
	return keys, nil
}

// claimsByPodIndexFunc indexes claims by the UID of the pod they were
// generated for.
func claimsByPodIndexFunc(obj any) ([]string, error) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, nil
	}
	podName, owner := podclaims.OwningPod(claim)
	if podName == "" {
		return nil, nil
	}
	return []string{string(owner.UID)}, nil
}

// uidSet is a bounded set of UIDs; the oldest entry goes first.
type uidSet struct {
	mutex   sync.Mutex
	members map[types.UID]struct{}
	order   []types.UID
	next    int
}

func newUIDSet(size int) *uidSet {
	return &uidSet{members: make(map[types.UID]struct{}, size), order: make([]types.UID, size)}
}

func (s *uidSet) Add(uid types.UID) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	if _, ok := s.members[uid]; ok {
		return
	}
	delete(s.members, s.order[s.next])
	s.order[s.next] = uid
	s.next = (s.next + 1) % len(s.order)
	s.members[uid] = struct{}{}
}

func (s *uidSet) Has(uid types.UID) bool {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	_, ok := s.members[uid]
	return ok
}
