// Package devicetainteviction is the device taint eviction controller.
// A device is tainted by its ResourceSlice (spec.devices[].taints, highest
// pool generation only) or by every DeviceTaintRule whose selector
// matches it. When a device allocated to a claim has a NoExecute taint
// that the claim's allocation does not tolerate, every pod in the claim's
// status.reservedFor is evicted once its tolerationSeconds, if any, have
// run out: the pod gets the condition DisruptionTarget and is deleted.
//
// Evictions are rate limited (Options.EvictionsPerSecond, token bucket),
// so that a mistaken rule cannot empty the cluster at once, and they are
// cancelled (with an event on the pod and the rule) when the taint goes
// away or becomes tolerated before they are due. All work happens in
// queue workers; event handlers only queue keys, delayed evictions wait
// in the queue until they are due.
//
// Each DeviceTaintRule reports its progress in the condition
// EvictionInProgress, written with server-side apply at most once per
// Options.StatusUpdateInterval: True/PodsPendingEviction while pods are
// waiting for their tolerationSeconds or the rate limit, False/Completed
// when none are left, with counts of pending, evicted and cancelled pods
// in the message; False/NotStarted for effects NoSchedule and None, with
// the number of pods that use selected devices without tolerating the
// taint. The evicted and cancelled counts are kept in memory: they start
// at zero when this controller (or a new leader) starts.
//
// A rule with an empty selector, which matches every device, is only
// admitted with the annotation
// resource.draplane.dev/confirm-select-all-devices: "true"
// (validation.ConfirmSelectAllDevicesAnnotation).
package devicetainteviction

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcescheme "github.com/draplane/draplane/generated/clientset/versioned/scheme"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/worker"
)

const (
	// ControllerName is used for logging, the work queue and as event
	// source.
	ControllerName = "devicetainteviction-controller"

	// FieldManager owns the DisruptionTarget pod condition and the
	// EvictionInProgress condition of DeviceTaintRules, both written with
	// server-side apply.
	FieldManager = "draplane-devicetainteviction-controller"

	// DefaultEvictionsPerSecond is the eviction rate when Options leaves
	// it unset.
	DefaultEvictionsPerSecond = 10
	// DefaultStatusUpdateInterval is how often at most the status of one
	// DeviceTaintRule is written when Options leaves it unset.
	DefaultStatusUpdateInterval = 5 * time.Second

	// Work item prefixes.
	podKeyPrefix      = "pod:"      // evaluate (and maybe evict) one pod
	rulePodsKeyPrefix = "rulepods:" // re-evaluate the pods a rule touches, then its status
	ruleKeyPrefix     = "rule:"     // update the status of one rule
	// allRulesKey updates the status of every rule, after claims changed.
	allRulesKey = "allrules"

	// claimsByConsumerIndex maps a pod UID to the claims reserved for it.
	claimsByConsumerIndex = "devicetainteviction-claims-by-consumer"
	// claimsByDeviceIndex maps "<driver>/<pool>/<device>" to the
	// allocated claims that use the device.
	claimsByDeviceIndex = "devicetainteviction-claims-by-device"
	// slicesByPoolIndex maps "<driver>/<pool>" to the pool's slices.
	slicesByPoolIndex = "devicetainteviction-slices-by-pool"
)

// Options tune the controller. The zero value gives the defaults.
type Options struct {
	// EvictionsPerSecond bounds how fast pods are evicted, over all
	// rules and slices. Zero means DefaultEvictionsPerSecond.
	EvictionsPerSecond float64
	// EvictionBurst is how many evictions may happen at once before the
	// rate applies. Zero means EvictionsPerSecond rounded up.
	EvictionBurst int
	// StatusUpdateInterval is the shortest time between two status
	// writes of the same DeviceTaintRule. Zero means
	// DefaultStatusUpdateInterval.
	StatusUpdateInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.EvictionsPerSecond < 0 || o.EvictionBurst < 0 || o.StatusUpdateInterval < 0 {
		return o, fmt.Errorf("options must not be negative: %+v", o)
	}
	if o.EvictionsPerSecond == 0 {
		o.EvictionsPerSecond = DefaultEvictionsPerSecond
	}
	if o.EvictionBurst == 0 {
		o.EvictionBurst = int(math.Ceil(o.EvictionsPerSecond))
	}
	if o.StatusUpdateInterval == 0 {
		o.StatusUpdateInterval = DefaultStatusUpdateInterval
	}
	return o, nil
}

// workQueue is the part of the rate-limited work queue the controller
// uses; tests put a queue there that they drive step by step.
type workQueue interface {
	Add(item string)
	AddAfter(item string, duration time.Duration)
	AddRateLimited(item string)
	Forget(item string)
	Get() (item string, shutdown bool)
	Done(item string)
	ShutDown()
}

// Controller is the device taint eviction controller. Create it with
// NewController, start it with Run.
type Controller struct {
	kubeClient     kubernetes.Interface
	resourceClient versioned.Interface
	opts           Options
	clock          clock.Clock

	podLister    corelisters.PodLister
	podIndexer   cache.Indexer
	podsSynced   cache.InformerSynced
	claimLister  resourcelisters.ResourceClaimLister
	claimIndexer cache.Indexer
	claimsSynced cache.InformerSynced
	sliceIndexer cache.Indexer
	slicesSynced cache.InformerSynced
	ruleLister   resourcelisters.DeviceTaintRuleLister
	rulesSynced  cache.InformerSynced
	watchesRules bool

	queue workQueue
	// evictionLimiter holds back evictions that are due, so that the
	// API server sees at most opts.EvictionsPerSecond deletes.
	evictionLimiter flowcontrol.RateLimiter

	// recorder is set by Run (tests set their own); nil drops events.
	recorder record.EventRecorder

	// mutex protects the fields below, which the workers share.
	mutex sync.Mutex
	// pending are the evictions that are scheduled, by pod
	// "<namespace>/<name>".
	pending map[string]*pendingEviction
	// evicted are the pods deleted by this controller that the informer
	// may still show as they were, by pod key. A bound pod stays around,
	// terminating, after the delete; until the cache says so it must not
	// be evicted (and counted) a second time.
	evicted map[string]types.UID
	// progress counts, by rule UID, what happened to the pods the rule
	// evicts, since this controller started.
	progress map[types.UID]*ruleProgress
	// lastStatusUpdate is when the status of a rule was last written, by
	// rule name.
	lastStatusUpdate map[string]time.Time
}

// pendingEviction is a pod that is going to be evicted.
type pendingEviction struct {
	podUID   types.UID
	decision *evictionDecision
}

// ruleProgress are the counts that a rule's status reports besides the
// pending evictions.
type ruleProgress struct {
	evicted, cancelled int
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
	sliceInformer resourceinformers.ResourceSliceInformer,
	taintRuleInformer resourceinformers.DeviceTaintRuleInformer,
	opts Options,
) (*Controller, error) {
	c, err := newController(kubeClient, resourceClient, podInformer, claimInformer, sliceInformer, taintRuleInformer, opts, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "device_taint_eviction"},
	)

	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPod(logger, obj, false) },
		UpdateFunc: func(_, obj any) { c.onPod(logger, obj, false) },
		DeleteFunc: func(obj any) { c.onPod(logger, obj, true) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	if _, err := claimInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onClaim(logger, nil, obj) },
		UpdateFunc: func(old, obj any) { c.onClaim(logger, old, obj) },
		DeleteFunc: func(obj any) { c.onClaim(logger, obj, nil) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("add claim event handler: %w", err)
	}
	if _, err := sliceInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onSlice(logger, nil, obj) },
		UpdateFunc: func(old, obj any) { c.onSlice(logger, old, obj) },
		DeleteFunc: func(obj any) { c.onSlice(logger, obj, nil) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("add slice event handler: %w", err)
	}
	if c.watchesRules {
		if _, err := taintRuleInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onRule(logger, nil, obj) },
			UpdateFunc: func(old, obj any) { c.onRule(logger, old, obj) },
			DeleteFunc: func(obj any) { c.onRule(logger, obj, nil) },
		}, cache.HandlerOptions{Logger: &logger}); err != nil {
			return nil, fmt.Errorf("add rule event handler: %w", err)
		}
	}
	setupMetrics()
	return c, nil
}

// newController builds the controller without queue and event handlers,
// which tests replace.
func newController(
	kubeClient kubernetes.Interface,
	resourceClient versioned.Interface,
	podInformer coreinformers.PodInformer,
	claimInformer resourceinformers.ResourceClaimInformer,
	sliceInformer resourceinformers.ResourceSliceInformer,
	taintRuleInformer resourceinformers.DeviceTaintRuleInformer,
	opts Options,
	clock clock.Clock,
) (*Controller, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{
		kubeClient:       kubeClient,
		resourceClient:   resourceClient,
		opts:             opts,
		clock:            clock,
		podLister:        podInformer.Lister(),
		podIndexer:       podInformer.Informer().GetIndexer(),
		podsSynced:       podInformer.Informer().HasSynced,
		claimLister:      claimInformer.Lister(),
		claimIndexer:     claimInformer.Informer().GetIndexer(),
		claimsSynced:     claimInformer.Informer().HasSynced,
		sliceIndexer:     sliceInformer.Informer().GetIndexer(),
		slicesSynced:     sliceInformer.Informer().HasSynced,
		ruleLister:       noRules,
		rulesSynced:      func() bool { return true },
		evictionLimiter:  flowcontrol.NewTokenBucketRateLimiterWithClock(float32(opts.EvictionsPerSecond), opts.EvictionBurst, clock),
		pending:          make(map[string]*pendingEviction),
		evicted:          make(map[string]types.UID),
		progress:         make(map[types.UID]*ruleProgress),
		lastStatusUpdate: make(map[string]time.Time),
	}
	// As upstream, DeviceTaintRules are not even watched while their gate
	// is off: the controller evicts for no rule and writes no rule's
	// status.
	if features.Enabled(features.DRADeviceTaintRules) {
		c.watchesRules = true
		c.ruleLister = taintRuleInformer.Lister()
		c.rulesSynced = taintRuleInformer.Informer().HasSynced
	}
	if err := c.claimIndexer.AddIndexers(cache.Indexers{
		claimsByConsumerIndex: claimsByConsumerIndexFunc,
		claimsByDeviceIndex:   claimsByDeviceIndexFunc,
	}); err != nil {
		return nil, fmt.Errorf("add claim indexers: %w", err)
	}
	if err := c.sliceIndexer.AddIndexers(cache.Indexers{slicesByPoolIndex: slicesByPoolIndexFunc}); err != nil {
		return nil, fmt.Errorf("add slice indexer: %w", err)
	}
	// A claim reserved for a PodGroup is used by the group's pods.
	if err := podclaims.AddPodsByGroupIndex(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("add pod indexer: %w", err)
	}
	return c, nil
}

// noRules is the rule lister while the DRADeviceTaintRules gate is off.
var noRules = resourcelisters.NewDeviceTaintRuleLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))

func claimsByConsumerIndexFunc(obj any) ([]string, error) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || claim.Status.Allocation == nil {
		return nil, nil
	}
	var uids []string
	for _, consumer := range claim.Status.ReservedFor {
		switch {
		case isPod(consumer):
			uids = append(uids, string(consumer.UID))
		case podclaims.IsGroupConsumer(consumer):
			uids = append(uids, groupConsumerKey(claim.Namespace, consumer.Name))
		}
	}
	return uids, nil
}

func claimsByDeviceIndexFunc(obj any) ([]string, error) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || claim.Status.Allocation == nil {
		return nil, nil
	}
	var devices []string
	for _, result := range claim.Status.Allocation.Devices.Results {
		devices = append(devices, deviceID{driver: result.Driver, pool: result.Pool, device: result.Device}.String())
	}
	return devices, nil
}

func slicesByPoolIndexFunc(obj any) ([]string, error) {
	slice, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, nil
	}
	return []string{slice.Spec.Driver + "/" + slice.Spec.Pool.Name}, nil
}

func isPod(consumer resourcev1.ResourceClaimConsumerReference) bool {
	return consumer.APIGroup == "" && consumer.Resource == "pods"
}

// groupConsumerKey is the claimsByConsumerIndex value of a PodGroup
// consumer (pods are indexed by UID; pods do not know their group's).
func groupConsumerKey(namespace, group string) string {
	return "podgroup:" + namespace + "/" + group
}

// consumerPod is a pod that uses a claim: reserved for it, or for its
// PodGroup.
type consumerPod struct {
	name string
	uid  types.UID
}

// consumerPods lists the pods that use the claim: its pod consumers and,
// with DRAWorkloadResourceClaims (as upstream: a PodGroup left in
// reservedFor from before the gate went off counts for nothing), the pods
// of its PodGroup consumers that the informer knows.
func (c *Controller) consumerPods(claim *resourcev1.ResourceClaim) []consumerPod {
	var pods []consumerPod
	for _, consumer := range claim.Status.ReservedFor {
		switch {
		case isPod(consumer):
			pods = append(pods, consumerPod{name: consumer.Name, uid: consumer.UID})
		case podclaims.IsGroupConsumer(consumer) && podclaims.GroupClaimsEnabled():
			objs, _ := c.podIndexer.ByIndex(podclaims.PodsByGroupIndex, claim.Namespace+"/"+consumer.Name)
			for _, obj := range objs {
				if pod, ok := obj.(*corev1.Pod); ok {
					pods = append(pods, consumerPod{name: pod.Name, uid: pod.UID})
				}
			}
		}
	}
	return pods
}

// Run waits for the informers, runs workers until ctx is done and then
// shuts the queue down. It blocks.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)

	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName, "workers", workers,
		"evictionsPerSecond", c.opts.EvictionsPerSecond, "evictionBurst", c.opts.EvictionBurst, "statusUpdateInterval", c.opts.StatusUpdateInterval)
	defer logger.Info("Shutting down controller", "controller", ControllerName)

	recorder, stopRecording := worker.StartRecorder(ctx, c.kubeClient, eventScheme(), ControllerName, 1)
	defer stopRecording()
	c.recorder = recorder

	worker.Run(ctx, c.queue, workers, c.handle, c.podsSynced, c.claimsSynced, c.slicesSynced, c.rulesSynced)
}

// eventScheme knows pods and DeviceTaintRules, the objects that events
// are about.
func eventScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(resourcescheme.AddToScheme(scheme))
	return scheme
}

// processNextItem handles the next work item; tests step the controller
// with it.
func (c *Controller) processNextItem(ctx context.Context) bool {
	return worker.ProcessNext(ctx, c.queue, c.handle)
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
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, will retry", "key", key)
		c.queue.AddRateLimited(key)
	}
}

// errPermanent marks errors that retrying cannot fix.
var errPermanent = errors.New("permanent error")

// sync handles one work item.
func (c *Controller) sync(ctx context.Context, key string) error {
	if key == allRulesKey {
		return c.syncAllRules(ctx)
	}
	prefix, objectKey, found := strings.Cut(key, ":")
	if !found {
		return fmt.Errorf("%w: work item %q has no prefix", errPermanent, key)
	}
	switch prefix + ":" {
	case podKeyPrefix:
		namespace, name, err := cache.SplitMetaNamespaceKey(objectKey)
		if err != nil {
			return fmt.Errorf("%w: work item %q: %w", errPermanent, key, err)
		}
		return c.syncPod(ctx, namespace, name)
	case rulePodsKeyPrefix:
		return c.syncRulePods(ctx, objectKey)
	case ruleKeyPrefix:
		return c.syncRuleStatus(ctx, objectKey)
	default:
		return fmt.Errorf("%w: work item %q has an unknown prefix", errPermanent, key)
	}
}

// The event handlers only decide what to queue, from the caches.

func (c *Controller) onPod(logger klog.Logger, obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	if c.isTracked(key) {
		// A deleted pod needs its pending eviction or eviction record
		// dropped, a changed one (say, finished) may no longer need one.
		c.queue.Add(podKeyPrefix + key)
		return
	}
	if deleted {
		return
	}
	if claims, err := c.claimIndexer.ByIndex(claimsByConsumerIndex, string(pod.UID)); err == nil && len(claims) > 0 {
		logger.V(6).Info("Pod uses allocated claims", "pod", klog.KObj(pod), "claims", len(claims))
		c.queue.Add(podKeyPrefix + key)
	}
}

// onClaim queues every pod that the claim is or was reserved for. Each
// consumer is queued on its own: whether it still exists, or is the
// instance the claim names, is for syncPod to find out, and one that does
// not must not keep the others from being looked at.
func (c *Controller) onClaim(logger klog.Logger, oldObj, newObj any) {
	oldClaim, newClaim := claimOf(oldObj), claimOf(newObj)
	if oldClaim != nil && newClaim != nil &&
		apiequality.Semantic.DeepEqual(oldClaim.Status.Allocation, newClaim.Status.Allocation) &&
		apiequality.Semantic.DeepEqual(oldClaim.Status.ReservedFor, newClaim.Status.ReservedFor) {
		return
	}
	queued := 0
	for _, claim := range []*resourcev1.ResourceClaim{oldClaim, newClaim} {
		if claim == nil || claim.Status.Allocation == nil {
			continue
		}
		for _, pod := range c.consumerPods(claim) {
			c.queue.Add(podKeyPrefix + claim.Namespace + "/" + pod.name)
			queued++
		}
	}
	if queued > 0 {
		logger.V(5).Info("Claim changed, checking its consumers", "claim", klog.KObj(newClaim), "pods", queued)
		// How many pods a rule affects may have changed.
		c.queue.Add(allRulesKey)
	}
}

func claimOf(obj any) *resourcev1.ResourceClaim {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, _ := obj.(*resourcev1.ResourceClaim)
	return claim
}

// onSlice queues the consumers of the claims that use a device of the
// slice. A new slice can also un-taint the devices of an older generation,
// so only updates that touch no taints and keep the generation are
// ignored.
func (c *Controller) onSlice(logger klog.Logger, oldObj, newObj any) {
	oldSlice, newSlice := sliceOf(oldObj), sliceOf(newObj)
	if oldSlice != nil && newSlice != nil &&
		oldSlice.Spec.Pool.Generation == newSlice.Spec.Pool.Generation &&
		!hasTaints(oldSlice) && !hasTaints(newSlice) {
		return
	}
	queued := 0
	for _, slice := range []*resourcev1.ResourceSlice{oldSlice, newSlice} {
		if slice == nil {
			continue
		}
		for _, device := range slice.Spec.Devices {
			id := deviceID{driver: slice.Spec.Driver, pool: slice.Spec.Pool.Name, device: device.Name}
			queued += c.queueConsumersOfDevice(id)
		}
	}
	if queued > 0 {
		logger.V(5).Info("Slice changed, checking consumers of its devices", "slice", klog.KObj(newSlice), "pods", queued)
	}
}

func sliceOf(obj any) *resourcev1.ResourceSlice {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	slice, _ := obj.(*resourcev1.ResourceSlice)
	return slice
}

func hasTaints(slice *resourcev1.ResourceSlice) bool {
	for _, device := range slice.Spec.Devices {
		if len(device.Taints) > 0 {
			return true
		}
	}
	return false
}

func (c *Controller) queueConsumersOfDevice(id deviceID) int {
	objs, err := c.claimIndexer.ByIndex(claimsByDeviceIndex, id.String())
	if err != nil {
		return 0
	}
	queued := 0
	for _, obj := range objs {
		claim := obj.(*resourcev1.ResourceClaim)
		for _, pod := range c.consumerPods(claim) {
			c.queue.Add(podKeyPrefix + claim.Namespace + "/" + pod.name)
			queued++
		}
	}
	return queued
}

// onRule queues the rule's pods: a worker finds them, since a rule may
// select many devices, and then queues the rule's status. Status-only
// updates, our own included, change nothing.
func (c *Controller) onRule(logger klog.Logger, oldObj, newObj any) {
	oldRule, newRule := ruleOf(oldObj), ruleOf(newObj)
	rule := newRule
	if rule == nil {
		rule = oldRule
	}
	if rule == nil {
		return
	}
	if oldRule != nil && newRule != nil && apiequality.Semantic.DeepEqual(oldRule.Spec, newRule.Spec) {
		return
	}
	logger.V(5).Info("DeviceTaintRule changed", "rule", klog.KObj(rule), "deleted", newRule == nil)
	c.queue.Add(rulePodsKeyPrefix + rule.Name)
}

func ruleOf(obj any) *resourcev1.DeviceTaintRule {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	rule, _ := obj.(*resourcev1.DeviceTaintRule)
	return rule
}

// isTracked reports whether the pod has a pending eviction or was evicted.
func (c *Controller) isTracked(podKey string) bool {
	c.mutex.Lock()
	defer c.mutex.Unlock()
	_, pending := c.pending[podKey]
	_, evicted := c.evicted[podKey]
	return pending || evicted
}
