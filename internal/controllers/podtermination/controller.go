// Package podtermination finishes the graceful deletion of pods in
// standalone mode. A real cluster's kubelet stops a deleted pod's
// containers and then removes the pod; standalone has no kubelet, so a
// bound pod deleted with a grace period would stay Terminating forever.
// This controller removes such pods once their grace period has passed,
// which is what a kubelet that stopped them in time would have done.
package podtermination

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/draplane/draplane/internal/worker"
)

// timestampResolution is how precisely the API stores a deletion
// timestamp: whole seconds, the fraction cut off.
const timestampResolution = time.Second

// gracePeriodEnd is the latest moment a grace period with this deletion
// timestamp can end: never earlier than the real end.
func gracePeriodEnd(deletionTimestamp time.Time) time.Time {
	return deletionTimestamp.Add(timestampResolution)
}

// ControllerName names the controller in logs and its work queue.
const ControllerName = "podtermination-controller"

// Controller deletes terminating pods whose grace period is over.
type Controller struct {
	client    kubernetes.Interface
	podLister corelisters.PodLister
	podSynced cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	clock     clock.Clock
}

// NewController wires the pod informer. Call it before starting the
// informer factory.
func NewController(logger klog.Logger, client kubernetes.Interface, podInformer coreinformers.PodInformer) (*Controller, error) {
	c := &Controller{
		client:    client,
		podLister: podInformer.Lister(),
		podSynced: podInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName},
		),
		clock: clock.RealClock{},
	}
	_, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	return c, nil
}

// enqueue queues only pods that are being deleted.
func (c *Controller) enqueue(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp == nil {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// Run processes pods until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName)
	defer logger.Info("Shutting down controller", "controller", ControllerName)
	worker.Run(ctx, c.queue, workers, c.handle, c.podSynced)
}

// handle syncs one pod and looks at it again when its grace period ends.
func (c *Controller) handle(ctx context.Context, key string) {
	requeueAfter, err := c.sync(ctx, key)
	worker.Requeue(ctx, c.queue, key, requeueAfter, err, "Finishing pod deletion failed", "pod")
}

// sync removes the pod if its grace period is over and otherwise says
// when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := c.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pod.DeletionTimestamp == nil {
		return 0, nil
	}
	// deletionTimestamp is when the grace period ends, stored in whole
	// seconds with the fraction cut off: the period ends up to a second
	// after it, so the pod stays until a second past it.
	if wait := gracePeriodEnd(pod.DeletionTimestamp.Time).Sub(c.clock.Now()); wait > 0 {
		return wait, nil
	}
	zero := int64(0)
	uid := pod.UID
	err = c.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or replaced by a new pod of the same name.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("delete pod %s after its grace period: %w", key, err)
	}
	klog.FromContext(ctx).V(2).Info("Removed pod after its grace period", "pod", klog.KObj(pod))
	return 0, nil
}
