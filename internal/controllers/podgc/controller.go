// Package podgc removes the pods of deleted nodes in standalone mode. In a
// cluster, kube-controller-manager's pod garbage collector deletes a pod
// bound to a Node that no longer exists, and the pod's generated claims
// follow it; standalone has no such collector, so a pod whose node was
// deleted would stay Running, with its claims and devices, forever. When
// a Node is deleted, this controller deletes every pod bound to it (with a
// zero grace period, as upstream's: nothing runs it any more). The
// resource claim controller then releases and deletes their claims. In
// aggregated mode the host cluster's collector does this.
package podgc

import (
	"context"
	"errors"
	"fmt"

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

	"github.com/draplane/draplane/internal/worker"
)

// ControllerName names the controller in logs and its work queue.
const ControllerName = "podgc-controller"

// podsByNodeIndex indexes pods by spec.nodeName.
const podsByNodeIndex = "podgc-by-node"

func podsByNodeIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// Controller deletes the pods of deleted nodes. Its queue holds node
// names.
type Controller struct {
	client     kubernetes.Interface
	podIndexer cache.Indexer
	podSynced  cache.InformerSynced
	nodeLister corelisters.NodeLister
	nodeSynced cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the pod and node informers. Call it before starting
// the informer factory.
func NewController(logger klog.Logger, client kubernetes.Interface, podInformer coreinformers.PodInformer, nodeInformer coreinformers.NodeInformer) (*Controller, error) {
	c := &Controller{
		client:     client,
		podIndexer: podInformer.Informer().GetIndexer(),
		podSynced:  podInformer.Informer().HasSynced,
		nodeLister: nodeInformer.Lister(),
		nodeSynced: nodeInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName},
		),
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podsByNodeIndex: podsByNodeIndexFunc}); err != nil {
		return nil, fmt.Errorf("add pod index: %w", err)
	}
	_, err := nodeInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.enqueueDeletedNode,
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("add node event handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueueDeletedNode(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if node, ok := obj.(*corev1.Node); ok {
		c.queue.Add(node.Name)
	}
}

// Run processes deleted nodes until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName)
	defer logger.Info("Shutting down controller", "controller", ControllerName)
	worker.Run(ctx, c.queue, workers, c.handle, c.podSynced, c.nodeSynced)
}

func (c *Controller) handle(ctx context.Context, node string) {
	err := c.sync(ctx, node)
	worker.Requeue(ctx, c.queue, node, 0, err, "Removing pods of a deleted node failed", "node")
}

// nodeGone asks the API server, not the cache, whether the node is gone:
// a node registered again a moment ago may not be in the informer yet.
func (c *Controller) nodeGone(ctx context.Context, name string) (bool, error) {
	if _, err := c.nodeLister.Get(name); err == nil {
		return false, nil
	}
	_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", name, err)
	}
	return false, nil
}

// sync deletes the pods bound to the node when it is gone.
func (c *Controller) sync(ctx context.Context, node string) error {
	gone, err := c.nodeGone(ctx, node)
	if err != nil || !gone {
		return err
	}
	objs, err := c.podIndexer.ByIndex(podsByNodeIndex, node)
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if err := c.deletePod(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) deletePod(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or replaced by a new pod of the same name.
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete pod %s of deleted node %s: %w", klog.KObj(pod), pod.Spec.NodeName, err)
	}
	klog.FromContext(ctx).V(2).Info("Removed pod of a deleted node", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
	return nil
}
