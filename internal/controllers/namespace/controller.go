// Package namespace empties terminating namespaces. Deleting a namespace
// only marks it Terminating (the "kubernetes" finalizer in spec.finalizers
// keeps it); this controller deletes every namespaced object of every kind
// the server serves, found through discovery, waits until none is left and
// then removes the finalizer through the finalize subresource, which lets
// the namespace go away.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/worker"
)

// podsResource is the one kind whose deletion this controller completes
// itself: there is no kubelet in standalone mode to confirm that a bound
// pod stopped, so once a pod's grace period is over it is deleted with a
// grace period of zero.
var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// Controller empties and finalizes terminating namespaces.
type Controller struct {
	client        kubernetes.Interface
	dynamicClient dynamic.Interface
	discovery     discovery.DiscoveryInterface
	namespaces    corelisters.NamespaceLister
	synced        cache.InformerSynced
	queue         workqueue.TypedRateLimitingInterface[string]
	// now is the clock used to decide whether a pod's grace period is over.
	now func() time.Time
}

// NewController returns a controller that watches namespaces through
// informer, deletes the content of terminating ones with dynamicClient (every
// namespaced resource that discovery lists with the list and delete verbs)
// and finalizes them with client.
func NewController(logger klog.Logger, client kubernetes.Interface, dynamicClient dynamic.Interface, discovery discovery.DiscoveryInterface, informer coreinformers.NamespaceInformer) *Controller {
	c := &Controller{
		client:        client,
		dynamicClient: dynamicClient,
		discovery:     discovery,
		namespaces:    informer.Lister(),
		synced:        informer.Informer().HasSynced,
		// Backoff is capped at 30s instead of the default 1000s: content
		// often waits for another controller to drop a finalizer, and no
		// event tells this controller when that happens.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"},
		),
		now: time.Now,
	}
	_, err := informer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		logger.Error(err, "Failed to add namespace event handler")
	}
	return c
}

// enqueue queues only namespaces that are being deleted.
func (c *Controller) enqueue(obj interface{}) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil {
		return
	}
	c.queue.Add(ns.Name)
}

// Run waits for the informer to sync, then runs workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting namespace controller")
	defer logger.Info("Shutting down namespace controller")
	worker.Run(ctx, c.queue, workers, c.handle, c.synced)
}

// handle finalizes one namespace, or looks at it again later.
func (c *Controller) handle(ctx context.Context, name string) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "namespace", name)
	ctx = klog.NewContext(ctx, logger)

	err := c.sync(ctx, name)
	var remaining *contentRemainingError
	switch {
	case err == nil:
		c.queue.Forget(name)
	case errors.As(err, &remaining) && remaining.estimate > 0:
		// Objects are waiting out a grace period: look again when it ends.
		logger.V(4).Info("Namespace content still terminating", "remaining", remaining.count, "retryAfter", remaining.estimate)
		c.queue.Forget(name)
		c.queue.AddAfter(name, remaining.estimate)
	default:
		logger.V(2).Info("Namespace not finalized yet, retrying", "err", err)
		c.queue.AddRateLimited(name)
	}
}

// contentRemainingError says that objects are left in the namespace after a
// deletion round; estimate is how long until the longest remaining grace
// period ends (zero when unknown, e.g. objects waiting for finalizers).
type contentRemainingError struct {
	count    int
	estimate time.Duration
}

func (e *contentRemainingError) Error() string {
	return fmt.Sprintf("%d objects remain in the namespace", e.count)
}

// sync deletes the content of a terminating namespace, reports progress in
// the namespace's conditions and, once it is empty, removes the
// "kubernetes" finalizer.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	report := c.deleteContent(ctx, name)
	if err := c.updateConditions(ctx, ns, report); err != nil {
		// Conditions only inform; the deletion goes on without them.
		klog.FromContext(ctx).V(2).Info("Failed to update namespace conditions", "err", err)
	}
	if err := report.err(); err != nil {
		return err
	}
	return c.finalize(ctx, name)
}

// deletionReport is the outcome of one round of deleting a namespace's
// content.
type deletionReport struct {
	discoveryErr error
	// deleteErrs has one error per resource that could not be listed or
	// deleted.
	deleteErrs []error
	// remaining counts the objects left per resource ("pods",
	// "resourceclaims.resource.draplane.dev").
	remaining map[string]int
	// finalizers counts the remaining objects that wait for each finalizer.
	finalizers map[string]int
	// retryAfter is when the longest grace period of a remaining object
	// ends.
	retryAfter time.Duration
}

// err is nil once the namespace is empty, a contentRemainingError while
// objects are going away, and the first failure otherwise.
func (r *deletionReport) err() error {
	switch {
	case r.discoveryErr != nil:
		return fmt.Errorf("discover namespaced resources: %w", r.discoveryErr)
	case len(r.deleteErrs) > 0:
		return errors.Join(r.deleteErrs...)
	}
	count := 0
	for _, n := range r.remaining {
		count += n
	}
	if count > 0 {
		return &contentRemainingError{count: count, estimate: r.retryAfter}
	}
	return nil
}

// deleteContent deletes every namespaced object in the namespace.
func (c *Controller) deleteContent(ctx context.Context, namespace string) *deletionReport {
	logger := klog.FromContext(ctx)
	report := &deletionReport{remaining: map[string]int{}, finalizers: map[string]int{}}
	resources, discoveryErr := c.deletableResources()
	// Some group could not be discovered: delete what can be found, but its
	// objects may still be there.
	report.discoveryErr = discoveryErr
	for _, gvr := range resources {
		left, err := c.deleteAllOf(ctx, gvr, namespace)
		if err != nil {
			report.deleteErrs = append(report.deleteErrs, fmt.Errorf("delete %s in namespace %s: %w", gvr.GroupResource(), namespace, err))
			continue
		}
		if len(left) == 0 {
			continue
		}
		logger.V(4).Info("Objects remain in namespace", "resource", gvr, "count", len(left))
		report.remaining[gvr.GroupResource().String()] = len(left)
		now := c.now()
		for _, obj := range left {
			for _, finalizer := range obj.GetFinalizers() {
				report.finalizers[finalizer]++
			}
			if deletionTimestamp := obj.GetDeletionTimestamp(); deletionTimestamp != nil {
				report.retryAfter = max(report.retryAfter, deletionTimestamp.Sub(now))
			}
		}
	}
	return report
}

// deletableResources lists the namespaced resources that support list and
// delete, in the preferred version of each group. A failure to discover some
// groups is returned with the resources of the others.
func (c *Controller) deletableResources() ([]schema.GroupVersionResource, error) {
	lists, err := discovery.ServerPreferredNamespacedResources(c.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	var resources []schema.GroupVersionResource
	seen := sets.New[schema.GroupVersionResource]()
	for _, list := range lists {
		gv, parseErr := schema.ParseGroupVersion(list.GroupVersion)
		if parseErr != nil {
			continue
		}
		for _, resource := range list.APIResources {
			verbs := sets.New([]string(resource.Verbs)...)
			if !resource.Namespaced || !verbs.HasAll("list", "delete") || strings.Contains(resource.Name, "/") {
				continue
			}
			gvr := gv.WithResource(resource.Name)
			if !seen.Has(gvr) {
				seen.Insert(gvr)
				resources = append(resources, gvr)
			}
		}
	}
	return resources, err
}

// deleteAllOf deletes every object of one resource in the namespace and
// returns the objects still there afterwards.
func (c *Controller) deleteAllOf(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]unstructured.Unstructured, error) {
	client := c.dynamicClient.Resource(gvr).Namespace(namespace)
	background := metav1.DeletePropagationBackground
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := c.now()
	deleted := 0
	for i := range list.Items {
		item := &list.Items[i]
		opts := metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: ptr.To(item.GetUID())},
		}
		if deletionTimestamp := item.GetDeletionTimestamp(); deletionTimestamp != nil {
			// Already going away: wait for its finalizers or grace period,
			// except for a pod whose grace period is over, because no
			// kubelet will finish its deletion.
			if gvr != podsResource || deletionTimestamp.Time.After(now) {
				continue
			}
			opts.GracePeriodSeconds = ptr.To[int64](0)
		}
		// NotFound: gone already. Conflict: replaced by a new object with the
		// same name, which the next round deletes.
		if err := client.Delete(ctx, item.GetName(), opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, err
		}
		deleted++
	}
	if deleted == 0 {
		return list.Items, nil
	}
	// Count what is really left: most deletions take effect at once.
	list, err = client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// finalize removes the "kubernetes" finalizer from the namespace's spec.
func (c *Controller) finalize(ctx context.Context, name string) error {
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	ns = ns.DeepCopy()
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize namespace %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Finalized namespace")
	return nil
}
