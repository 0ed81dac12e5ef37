// Package allocation is the allocation controller. In standalone mode it
// is the scheduler for pods that use ResourceClaims: once all claims of a
// pod exist, it picks a node whose devices satisfy them, allocates the
// claims, reserves them for the pod and binds the pod. Pods that were
// created with spec.nodeName set get their claims allocated on that node.
// A pod that cannot be placed gets a PodScheduled=False condition and a
// Warning event explaining why, and is retried when slices, claims,
// classes, nodes or taint rules change.
package allocation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
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
	"k8s.io/utils/clock"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/worker"
)

const (
	// ControllerName is used for logging, the work queue and as event
	// source.
	ControllerName = "allocation-controller"

	// FieldManager owns what this controller writes.
	FieldManager = "draplane-allocation-controller"

	// Event reasons on pods.
	ReasonFailedScheduling = "FailedScheduling"
	ReasonScheduled        = "Scheduled"
	ReasonFailedAllocation = "FailedResourceAllocation"
	ReasonUnschedulable    = corev1.PodReasonUnschedulable

	// ConditionClaimsAllocated on a pod that was bound to its node by
	// someone else says whether its claims could be allocated and
	// reserved for that node (PodScheduled is not ours to change there).
	// It is set False with ReasonFailedAllocation when they cannot, and
	// True with ReasonAllocated once they are.
	ConditionClaimsAllocated corev1.PodConditionType = "ResourceClaimsAllocated"

	// ReasonAllocated is the reason of ConditionClaimsAllocated True: a
	// condition reason, a plain string like the event reasons above.
	ReasonAllocated = "Allocated"

	// boundPodsCacheSize bounds the memory of pods this controller bound
	// and the informer does not show bound yet.
	boundPodsCacheSize = 10000
)

// Options tune the controller. The zero value is what the server uses.
type Options struct {
	// Policy chooses among nodes that fit; MostAllocated by default.
	Policy allocator.Policy
	// Selectors compiles device selectors; the CEL environment of
	// package cel by default.
	Selectors allocator.SelectorCompiler
	// MinRetryDelay and MaxRetryDelay bound the per-pod exponential
	// backoff after errors and between attempts to place an
	// unschedulable pod. Defaults: 50ms and 30s.
	MinRetryDelay, MaxRetryDelay time.Duration
	// Mode says how a pod is put on the chosen node and which unbound
	// pods are for this controller to place: podmode.Standalone (bind
	// ungated pods) when nil, podmode.Aggregated for host pods.
	Mode podmode.Mode
	// Namespaces tell whether a namespace allows admin access
	// (resourceapi.AdminAccessNamespaceLabel). Without them no claim is
	// granted admin access.
	Namespaces coreinformers.NamespaceInformer
	// ExtendedResources makes a pod that asks for extended resources
	// backed by DeviceClasses wait until the claim for them is recorded
	// in its status (standalone mode, where the resource claim controller
	// makes that claim).
	ExtendedResources bool
	// BindingTimeout is how long after its allocation a pod waits for
	// the binding conditions of its devices before the claim is
	// deallocated and the pod placed again. DefaultBindingTimeout when
	// not positive.
	BindingTimeout time.Duration
	// Clock tells the time of binding deadlines; the real clock when nil.
	Clock clock.PassiveClock
	// PodGroups, when set, makes the pods of a gang PodGroup (named in
	// their spec.schedulingGroup) be placed together (gang.go). Without
	// it spec.schedulingGroup is ignored.
	PodGroups schedulinginformers.PodGroupInformer
	// GangBudget bounds the allocator searches of one gang placement;
	// allocator.DefaultGangBudget when not positive.
	GangBudget int
	// GangGreedy places a gang's pods one after the other without going
	// back to earlier pods' nodes and devices, as a scheduler that places
	// pods one at a time would; still all or nothing. For comparisons.
	GangGreedy bool
	// FitNodeResources makes the controller count what the pods bound to
	// each node request and keep pods off nodes whose allocatable cpu,
	// memory, ephemeral storage or pod count cannot hold them, as
	// kube-scheduler does (noderesources.go). For a host cluster's nodes;
	// the simulator's carry no such accounting.
	FitNodeResources bool
	// Finalizer protects the claims the controller allocates;
	// resourceapi.Finalizer when empty. A host cluster's claims get
	// upstream's (podmode.UpstreamFinalizer), which its resource claim
	// controller removes when it deallocates them.
	Finalizer string
	// OwnerTaintKey, when set, limits the controller to the devices that
	// carry a taint of this key (ownership.go): beside another scheduler
	// that allocates from the same slices, each keeps to its own devices.
	OwnerTaintKey string
}

// Controller is the allocation controller. Create it with NewController,
// start it with Run.
type Controller struct {
	// mode places pods on nodes.
	mode           podmode.Mode
	kubeClient     kubernetes.Interface
	resourceClient versioned.Interface

	podLister   corelisters.PodLister
	podIndexer  cache.Indexer
	nodeLister  corelisters.NodeLister
	claimLister resourcelisters.ResourceClaimLister
	classLister resourcelisters.DeviceClassLister
	// podGroupLister is nil without Options.PodGroups.
	podGroupLister schedulinglisters.PodGroupLister
	synced         []cache.InformerSynced

	// extendedResources: see Options.ExtendedResources.
	extendedResources bool
	// nodeRequests is set with Options.FitNodeResources.
	nodeRequests *nodeRequests
	// finalizer: see Options.Finalizer.
	finalizer string

	// ownWrites keeps the echoes of this controller's claim writes from
	// queueing the pod they were made for.
	ownWrites *ownWrites

	// state is what placements are decided from; its mutex is the
	// critical section of node selection (placement.go).
	state *placementState
	// unschedulable are the pods waiting for a cluster event.
	unschedulable *unschedulablePods

	// bound remembers pods this controller bound, so a sync before the
	// informer shows the binding does not try again.
	bound *boundPods

	// recorder is set by Run (tests that call sync directly set their
	// own); nil drops events.
	recorder record.EventRecorder

	// bindingTimeout, clock and waits serve pods that wait for binding
	// conditions (bindingconditions.go).
	bindingTimeout time.Duration
	clock          clock.PassiveClock
	waits          *bindingWaits

	queue workqueue.TypedRateLimitingInterface[string]
}

// NewController wires event handlers and indexers into the informers, so
// it must be called before the informers start. It starts nothing: start
// the informer factories, then call Run.
func NewController(
	logger klog.Logger,
	kubeClient kubernetes.Interface,
	resourceClient versioned.Interface,
	podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer,
	claimInformer resourceinformers.ResourceClaimInformer,
	classInformer resourceinformers.DeviceClassInformer,
	sliceInformer resourceinformers.ResourceSliceInformer,
	taintRuleInformer resourceinformers.DeviceTaintRuleInformer,
	opts Options,
) (*Controller, error) {
	if opts.MinRetryDelay <= 0 {
		opts.MinRetryDelay = 50 * time.Millisecond
	}
	if opts.MaxRetryDelay <= 0 {
		opts.MaxRetryDelay = 30 * time.Second
	}
	if opts.BindingTimeout <= 0 {
		opts.BindingTimeout = DefaultBindingTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		mode:           podmode.OrStandalone(opts.Mode),
		kubeClient:     kubeClient,
		resourceClient: resourceClient,
		podLister:      podInformer.Lister(),
		podIndexer:     podInformer.Informer().GetIndexer(),
		nodeLister:     nodeInformer.Lister(),
		claimLister:    claimInformer.Lister(),
		classLister:    classInformer.Lister(),
		synced: []cache.InformerSynced{
			podInformer.Informer().HasSynced,
			nodeInformer.Informer().HasSynced,
			claimInformer.Informer().HasSynced,
			classInformer.Informer().HasSynced,
			sliceInformer.Informer().HasSynced,
		},
		ownWrites:     newOwnWrites(),
		unschedulable: newUnschedulablePods(opts.Clock),
		bound:         newBoundPods(boundPodsCacheSize),

		bindingTimeout: opts.BindingTimeout,
		clock:          opts.Clock,
		waits:          newBindingWaits(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.MinRetryDelay, opts.MaxRetryDelay),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "allocation"},
		),
	}
	c.state = newPlacementState(placementInputs{
		allocator:     allocator.New(allocator.Options{Policy: opts.Policy, Selectors: opts.Selectors}),
		podLister:     c.podLister,
		nodeLister:    c.nodeLister,
		claimLister:   c.claimLister,
		classLister:   c.classLister,
		sliceLister:   sliceInformer.Lister(),
		gangBudget:    opts.GangBudget,
		gangGreedy:    opts.GangGreedy,
		ownerTaintKey: opts.OwnerTaintKey,
		waits:         c.waits,
		bound:         c.bound,
		// Read at each decision: tests set the controller's clock.
		now: func() time.Time { return c.clock.Now() },
	})
	c.extendedResources = opts.ExtendedResources
	c.finalizer = opts.Finalizer
	if c.finalizer == "" {
		c.finalizer = resourceapi.Finalizer
	}
	if opts.FitNodeResources {
		c.nodeRequests = newNodeRequests()
		c.nodeRequests.freed = func(node string) {
			c.requeueUnschedulable(logger, "a pod left its node", klog.KRef("", node), "")
		}
		c.state.nodeRequests = c.nodeRequests
		if _, err := podInformer.Informer().AddEventHandlerWithOptions(c.nodeRequests.handler(), cache.HandlerOptions{Logger: &logger}); err != nil {
			return nil, fmt.Errorf("add pod event handler for node resources: %w", err)
		}
	}
	taintRuleInformer = c.useTaintRules(taintRuleInformer)

	if err := podclaims.AddPodsByClaimIndex(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("add pod indexer: %w", err)
	}
	if err := c.useOptionalInformers(logger, podInformer, opts); err != nil {
		return nil, err
	}

	if err := c.addEventHandlers(logger, podInformer, nodeInformer, claimInformer, classInformer, sliceInformer, taintRuleInformer); err != nil {
		return nil, err
	}

	setupMetrics()
	return c, nil
}

// useOptionalInformers watches the informers of Options that may be nil:
// PodGroups (gangs, group claims) and Namespaces (admin access).
func (c *Controller) useOptionalInformers(logger klog.Logger, podInformer coreinformers.PodInformer, opts Options) error {
	if opts.PodGroups != nil {
		if err := podclaims.AddPodsByGroupIndex(podInformer.Informer()); err != nil {
			return fmt.Errorf("add pod indexer: %w", err)
		}
		c.podGroupLister = opts.PodGroups.Lister()
		c.state.podGroupLister = c.podGroupLister
		c.synced = append(c.synced, opts.PodGroups.Informer().HasSynced)
		if _, err := opts.PodGroups.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onPodGroup(logger, obj) },
			UpdateFunc: func(_, obj any) { c.onPodGroup(logger, obj) },
			DeleteFunc: func(obj any) { c.onPodGroup(logger, obj) },
		}, cache.HandlerOptions{Logger: &logger}); err != nil {
			return fmt.Errorf("add PodGroup event handler: %w", err)
		}
	}
	if opts.Namespaces != nil {
		c.state.namespaceLister = opts.Namespaces.Lister()
		c.synced = append(c.synced, opts.Namespaces.Informer().HasSynced)
		if _, err := opts.Namespaces.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onNamespaceUpdate(logger, &corev1.Namespace{}, obj) },
			UpdateFunc: func(oldObj, obj any) { c.onNamespaceUpdate(logger, oldObj, obj) },
		}, cache.HandlerOptions{Logger: &logger}); err != nil {
			return fmt.Errorf("add namespace event handler: %w", err)
		}
	}
	return nil
}

// useTaintRules sets up the DeviceTaintRule lister and returns the
// informer, or nil while the DRADeviceTaintRules gate is off: as upstream's
// scheduler, the rules are then not even watched and taint nothing.
func (c *Controller) useTaintRules(informer resourceinformers.DeviceTaintRuleInformer) resourceinformers.DeviceTaintRuleInformer {
	if informer == nil || !features.Enabled(features.DRADeviceTaintRules) {
		return nil
	}
	c.state.taintRuleLister = informer.Lister()
	c.synced = append(c.synced, informer.Informer().HasSynced)
	return informer
}

// addEventHandlers makes the informers' events queue pods and keep the
// placement state current.
func (c *Controller) addEventHandlers(logger klog.Logger,
	podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer,
	claimInformer resourceinformers.ResourceClaimInformer,
	classInformer resourceinformers.DeviceClassInformer,
	sliceInformer resourceinformers.ResourceSliceInformer,
	taintRuleInformer resourceinformers.DeviceTaintRuleInformer,
) error {
	type handler struct {
		what     string
		informer cache.SharedIndexInformer
		funcs    cache.ResourceEventHandlerFuncs
	}
	handlers := []handler{
		{"pod", podInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onPod(logger, obj, false) },
			UpdateFunc: func(oldObj, obj any) { c.onPodUpdate(logger, oldObj, obj) },
			DeleteFunc: func(obj any) { c.onPod(logger, obj, true) },
		}},
		{"node", nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onNode(logger, nil, obj) },
			UpdateFunc: func(oldObj, obj any) { c.onNode(logger, oldObj, obj) },
			// A node that goes away frees nothing, it only stops being a
			// candidate.
			DeleteFunc: func(any) { c.onNodeDeleted() },
		}},
		{"claim", claimInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onClaim(logger, obj, false) },
			UpdateFunc: func(_, obj any) { c.onClaim(logger, obj, false) },
			DeleteFunc: func(obj any) { c.onClaim(logger, obj, true) },
		}},
		{"device class", classInformer.Informer(), c.snapshotHandler(logger, "DeviceClass")},
		{"resource slice", sliceInformer.Informer(), c.snapshotHandler(logger, "ResourceSlice")},
	}
	if taintRuleInformer != nil {
		handlers = append(handlers, handler{"device taint rule", taintRuleInformer.Informer(), c.snapshotHandler(logger, "DeviceTaintRule")})
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandlerWithOptions(countingHandler(&c.state.preemptionInputs, h.funcs), cache.HandlerOptions{Logger: &logger}); err != nil {
			return fmt.Errorf("add %s event handler: %w", h.what, err)
		}
	}
	return nil
}

// Run waits for the informers, runs workers until ctx is done and then
// shuts the queue down. It blocks.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)

	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName, "workers", workers)
	defer logger.Info("Shutting down controller", "controller", ControllerName)

	recorder, stopRecording := worker.StartRecorder(ctx, c.kubeClient, scheme.Scheme, ControllerName, eventShards)
	defer stopRecording()
	c.recorder = recorder

	if cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		if err := c.restoreNominations(ctx); err != nil {
			logger.Error(err, "Restoring nominations")
		}
	}
	runningState.Store(c.state)
	defer runningState.CompareAndSwap(c.state, nil)
	go wait.UntilWithContext(ctx, c.flushLeftover, flushEvery)
	worker.Run(ctx, c.queue, workers, c.handle, c.synced...)
}

// eventShards is how many broadcasters write the controller's events: it
// records one per placed pod, and one broadcaster dropped Scheduled events
// at the rates pods are placed (see worker.StartRecorder).
const eventShards = 4

// errUnschedulable: the pod waits for a cluster event; its backoff keeps
// growing so that a busy cluster does not retry it in a hot loop.
var errUnschedulable = errors.New("pod is unschedulable")

// errRetryLater: another worker is busy with something the pod needs;
// not worth an error log.
var errRetryLater = errors.New("retry later")

// handle syncs one pod; an unschedulable pod waits for a cluster event,
// other failures retry with backoff.
func (c *Controller) handle(ctx context.Context, key string) {
	var err error
	if strings.HasPrefix(key, groupKeyPrefix) {
		err = c.syncGroup(ctx, key)
	} else {
		err = c.syncPod(ctx, key)
	}
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, errUnschedulable):
		// Parked until a cluster event; see markUnschedulable.
	case errors.Is(err, errRetryLater):
		klog.FromContext(ctx).V(4).Info("Retrying later", "pod", key, "reason", err)
		c.queue.AddRateLimited(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "pod", key)
		c.queue.AddRateLimited(key)
	}
}

// onPod queues pods that use claims and still need work. It only looks
// at caches.
func (c *Controller) onPod(logger klog.Logger, obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		logger.Error(nil, "Unexpected object in pod event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	if !c.handles(pod) {
		return
	}
	key := podKey(pod)
	if deleted || podclaims.IsDone(pod) || pod.DeletionTimestamp != nil {
		c.unschedulable.remove(key)
		if deleted {
			c.bound.remove(pod.UID)
			c.waits.done(pod.UID, nil)
		}
		c.dropNomination(logger, pod.UID)
		return
	}
	if pod.Spec.NodeName != "" {
		// The informer caught up with the binding.
		c.bound.remove(pod.UID)
		if !c.boundPodNeedsWork(pod) {
			return
		}
	}
	c.queue.Add(key)
}

// onNamespaceUpdate: a namespace that gains or loses the admin access
// label changes which claims may be allocated.
func (c *Controller) onNamespaceUpdate(logger klog.Logger, oldObj, obj any) {
	old, okOld := oldObj.(*corev1.Namespace)
	namespace, ok := obj.(*corev1.Namespace)
	if !okOld || !ok || old.Labels[resourceapi.AdminAccessNamespaceLabel] == namespace.Labels[resourceapi.AdminAccessNamespaceLabel] {
		return
	}
	c.requeueUnschedulable(logger, "namespace admin access label changed", klog.KObj(namespace), "")
}

// onPodUpdate ignores updates of parked pods that cannot change whether
// they fit, above all the PodScheduled condition this controller writes
// itself: a parked pod waits for cluster events, not for its own status.
func (c *Controller) onPodUpdate(logger klog.Logger, oldObj, obj any) {
	old, okOld := oldObj.(*corev1.Pod)
	pod, ok := obj.(*corev1.Pod)
	if okOld && ok && (c.isUnschedulable(podKey(pod)) || podclaims.GroupOf(pod) != "" && c.isUnschedulable(groupKey(pod.Namespace, podclaims.GroupOf(pod)))) &&
		old.UID == pod.UID &&
		pod.DeletionTimestamp == nil &&
		pod.Status.Phase == old.Status.Phase &&
		equality.Semantic.DeepEqual(old.Spec, pod.Spec) &&
		equality.Semantic.DeepEqual(podclaims.ClaimsOf(old), podclaims.ClaimsOf(pod)) &&
		equality.Semantic.DeepEqual(podclaims.StatusOf(old), podclaims.StatusOf(pod)) {
		return
	}
	c.onPod(logger, obj, false)
}

// boundPodNeedsWork: a pod on a node whose claims all exist, are allocated
// and reserved for it needs nothing from us. That includes claims this
// controller allocated and reserved for it that the informer does not
// show yet: the binding often comes back before the claim does.
func (c *Controller) boundPodNeedsWork(pod *corev1.Pod) bool {
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		name, _, err := podclaims.ClaimName(pod, podClaim)
		if err != nil {
			return errors.Is(err, podclaims.ErrClaimNotGenerated)
		}
		if name == nil {
			continue
		}
		claim, err := c.claimLister.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil {
			// Comes back through the claim handler once it exists.
			continue
		}
		if (claim.Status.Allocation == nil || !podclaims.IsReservedForPod(pod, claim)) && !c.state.writtenFor(claim.UID, c.state.consumerFor(pod, claim).UID) {
			return true
		}
	}
	return false
}

// onNode: a node that becomes usable or changes labels, taints or
// schedulability may fit pods that did not fit before. Other updates
// (heartbeats, other status) change nothing that node selection reads, so
// they keep the node set as it is.
func (c *Controller) onNode(logger klog.Logger, oldObj, obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if old, ok := oldObj.(*corev1.Node); ok {
		if nodeReady(old) == nodeReady(node) &&
			old.Spec.Unschedulable == node.Spec.Unschedulable &&
			equality.Semantic.DeepEqual(old.Labels, node.Labels) &&
			equality.Semantic.DeepEqual(old.Spec.Taints, node.Spec.Taints) {
			return
		}
	}
	c.state.nodesGeneration.Add(1)
	c.requeueUnschedulable(logger, "node changed", klog.KObj(node), "")
}

// onNodeDeleted: the node is no candidate any more.
func (c *Controller) onNodeDeleted() { c.state.nodesGeneration.Add(1) }

// onClaim keeps the allocation tracker current and queues the pods that
// use the claim. A claim that releases devices may let unschedulable
// pods fit.
func (c *Controller) onClaim(logger klog.Logger, obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		logger.Error(nil, "Unexpected object in claim event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	var allocation *resourceapi.AllocationResult
	if claim.Status.Allocation != nil && !deleted {
		allocation = &resourceapi.AllocationResult{}
		if err := resourcev1.Convert_v1_AllocationResult_To_resource_AllocationResult(claim.Status.Allocation, allocation, nil); err != nil {
			logger.Error(err, "Converting allocation", "claim", klog.KObj(claim))
			return
		}
	}
	// writer is the pod this controller made the change for, if it did:
	// the echo of its own write must not retry that pod (its attempt
	// knows what it wrote and, when it released devices, told the
	// others itself).
	writer := c.ownWrites.observe(claim.UID, claim.ResourceVersion, deleted)
	if freed := c.state.observe(claim.UID, claim.ResourceVersion, allocation, deleted); freed && writer == "" {
		c.requeueUnschedulable(logger, "claim released devices", klog.KObj(claim), "")
	}

	pods, err := c.podIndexer.ByIndex(podclaims.PodsByClaimIndex, claim.Namespace+"/"+claim.Name)
	if err != nil {
		logger.Error(err, "Listing pods of claim from cache", "claim", klog.KObj(claim))
		return
	}
	for _, obj := range pods {
		if pod, ok := obj.(*corev1.Pod); ok && writer != "" && podKey(pod) == writer {
			continue
		}
		c.onPod(logger, obj, false)
	}
}

// snapshotHandler: classes, slices and taint rules change the inventory.
func (c *Controller) snapshotHandler(logger klog.Logger, kind string) cache.ResourceEventHandlerFuncs {
	changed := func(obj any) {
		c.state.snapshotGeneration.Add(1)
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		ref := klog.ObjectRef{}
		if object, ok := obj.(interface{ GetName() string }); ok {
			ref.Name = object.GetName()
		}
		c.requeueUnschedulable(logger, kind+" changed", ref, "")
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
}

// requeueUnschedulable gives every parked pod but except another
// attempt, each after its own growing backoff.
func (c *Controller) requeueUnschedulable(logger klog.Logger, why string, object klog.ObjectRef, except string) {
	keys := c.unschedulable.moveAll(except)
	if len(keys) == 0 {
		return
	}
	logger.V(5).Info("Retrying unschedulable pods", "reason", why, "object", object, "pods", len(keys))
	for _, key := range keys {
		c.queue.AddRateLimited(key)
	}
}

// flushLeftover retries the pods parked for longer than maxParked, as
// kube-scheduler's flushUnschedulablePodsLeftover does.
func (c *Controller) flushLeftover(ctx context.Context) {
	keys := c.unschedulable.takeOlderThan(maxParked)
	if len(keys) == 0 {
		return
	}
	klog.FromContext(ctx).V(4).Info("Retrying pods unschedulable for long", "pods", len(keys), "after", maxParked)
	for _, key := range keys {
		c.queue.AddRateLimited(key)
	}
}

// markUnschedulable parks a pod until the next cluster event. An event
// that arrived while the attempt ran may already have changed the
// answer: then the pod is retried after its backoff right away.
func (c *Controller) markUnschedulable(key string, eventsBefore int64) {
	if !c.unschedulable.park(key, eventsBefore) {
		c.queue.AddRateLimited(key)
	}
}

func (c *Controller) clearUnschedulable(key string) { c.unschedulable.remove(key) }

func (c *Controller) isUnschedulable(key string) bool { return c.unschedulable.has(key) }

func (c *Controller) eventf(pod *corev1.Pod, eventType, reason, messageFmt string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(pod, eventType, reason, messageFmt, args...)
	}
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// boundPods is a bounded map of pod UID to the node the controller bound
// it to; the oldest entry goes first.
type boundPods struct {
	mutex sync.Mutex
	nodes map[types.UID]string
	order []types.UID
	next  int
}

func newBoundPods(size int) *boundPods {
	return &boundPods{nodes: make(map[types.UID]string, size), order: make([]types.UID, size)}
}

func (b *boundPods) add(uid types.UID, node string) {
	b.mutex.Lock()
	defer b.mutex.Unlock()
	if _, ok := b.nodes[uid]; ok {
		b.nodes[uid] = node
		return
	}
	delete(b.nodes, b.order[b.next])
	b.order[b.next] = uid
	b.next = (b.next + 1) % len(b.order)
	b.nodes[uid] = node
}

func (b *boundPods) get(uid types.UID) (string, bool) {
	b.mutex.Lock()
	defer b.mutex.Unlock()
	node, ok := b.nodes[uid]
	return node, ok
}

func (b *boundPods) remove(uid types.UID) {
	b.mutex.Lock()
	defer b.mutex.Unlock()
	delete(b.nodes, uid)
}

// truncate keeps event and condition messages within what the API takes.
func truncate(message string, max int) string {
	if len(message) <= max {
		return message
	}
	return strings.TrimSpace(message[:max-3]) + "..."
}
