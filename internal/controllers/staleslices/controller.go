// Package staleslices removes the ResourceSlices of nodes that are gone.
// In a cluster the garbage collector deletes a slice whose owner Node was
// deleted; standalone has no garbage collector, so this controller does
// it: a slice whose owner reference names a Node that no longer exists (by
// name and UID) is deleted, and when a Node is deleted while the
// controller watches, every slice with that spec.nodeName goes with it.
// A slice without an owner whose Node exists gets the Node's UID noted in
// NodeUIDAnnotation, so that when the Node is deleted while no controller
// runs, the slice goes when the controller starts (its informers list
// every slice then). Slices for a node name that never had a Node (as far
// as the controller saw) and no owner are left alone: they are published
// by hand, often before the node registers.
package staleslices

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/worker"
)

// ControllerName names the controller in logs and its work queue.
const ControllerName = "staleslices-controller"

// NodeUIDAnnotation on a slice without an owner is the UID of its node
// (spec.nodeName) when the controller last saw that Node.
const NodeUIDAnnotation = "resource.draplane.dev/node-uid"

// Keys of the queue: "slice/<name>" checks one slice's owner,
// "node/<name>" removes the slices of a deleted node, "added-node/<name>"
// checks the slices without an owner of a node that was added.
const (
	slicePrefix     = "slice/"
	nodePrefix      = "node/"
	addedNodePrefix = "added-node/"
)

// Controller deletes the slices of nodes that are gone.
type Controller struct {
	kubeClient     kubernetes.Interface
	resourceClient versioned.Interface
	nodeLister     corelisters.NodeLister
	nodeSynced     cache.InformerSynced
	sliceLister    resourcelisters.ResourceSliceLister
	sliceIndexer   cache.Indexer
	sliceSynced    cache.InformerSynced
	queue          workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the node and slice informers. Call it before
// starting the informer factories.
func NewController(logger klog.Logger, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	nodeInformer coreinformers.NodeInformer, sliceInformer resourceinformers.ResourceSliceInformer) (*Controller, error) {
	c := &Controller{
		kubeClient:     kubeClient,
		resourceClient: resourceClient,
		nodeLister:     nodeInformer.Lister(),
		nodeSynced:     nodeInformer.Informer().HasSynced,
		sliceLister:    sliceInformer.Lister(),
		sliceIndexer:   sliceInformer.Informer().GetIndexer(),
		sliceSynced:    sliceInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName},
		),
	}
	if err := sliceInformer.Informer().AddIndexers(cache.Indexers{slicesByNodeIndex: slicesByNodeIndexFunc}); err != nil {
		return nil, fmt.Errorf("add slice index: %w", err)
	}
	_, err := sliceInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueSlice,
		UpdateFunc: func(_, obj any) { c.enqueueSlice(obj) },
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("add slice event handler: %w", err)
	}
	_, err = nodeInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueAddedNode,
		DeleteFunc: c.enqueueDeletedNode,
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("add node event handler: %w", err)
	}
	return c, nil
}

// nodeOwner returns the Node owner reference of a slice, if it has one.
func nodeOwner(slice *resourcev1.ResourceSlice) (metav1.OwnerReference, bool) {
	for _, ref := range slice.OwnerReferences {
		if ref.Kind == "Node" && ref.APIVersion == "v1" {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}

// slicesByNodeIndex indexes slices without an owner by spec.nodeName.
const slicesByNodeIndex = "staleslices-unowned-by-node"

func slicesByNodeIndexFunc(obj any) ([]string, error) {
	slice, ok := obj.(*resourcev1.ResourceSlice)
	if !ok || len(slice.OwnerReferences) > 0 || ptr.Deref(slice.Spec.NodeName, "") == "" {
		return nil, nil
	}
	return []string{*slice.Spec.NodeName}, nil
}

// enqueueSlice queues slices owned by a Node and slices of one node
// without an owner.
func (c *Controller) enqueueSlice(obj any) {
	slice, ok := obj.(*resourcev1.ResourceSlice)
	if !ok || slice.DeletionTimestamp != nil {
		return
	}
	_, owned := nodeOwner(slice)
	if owned || (len(slice.OwnerReferences) == 0 && ptr.Deref(slice.Spec.NodeName, "") != "") {
		c.queue.Add(slicePrefix + slice.Name)
	}
}

// enqueueAddedNode queues a node that was added: its slices without an
// owner get its UID noted.
func (c *Controller) enqueueAddedNode(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		c.queue.Add(addedNodePrefix + node.Name)
	}
}

func (c *Controller) enqueueDeletedNode(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.queue.Add(nodePrefix + node.Name)
}

// Run processes slices and nodes until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName)
	defer logger.Info("Shutting down controller", "controller", ControllerName)
	worker.Run(ctx, c.queue, workers, c.handle, c.nodeSynced, c.sliceSynced)
}

func (c *Controller) handle(ctx context.Context, key string) {
	if err := c.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Removing stale slices failed", "key", key)
		c.queue.AddRateLimited(key)
		return
	}
	c.queue.Forget(key)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, slicePrefix):
		return c.syncSlice(ctx, strings.TrimPrefix(key, slicePrefix))
	case strings.HasPrefix(key, nodePrefix):
		return c.syncNode(ctx, strings.TrimPrefix(key, nodePrefix))
	case strings.HasPrefix(key, addedNodePrefix):
		return c.syncAddedNode(strings.TrimPrefix(key, addedNodePrefix))
	}
	return nil
}

// nodeGone asks the API server, not the cache, whether the node with this
// name and UID (any UID when empty) is gone: a node registered a moment
// ago may not be in the informer yet.
func (c *Controller) nodeGone(ctx context.Context, name string, uid types.UID) (bool, error) {
	if node, err := c.nodeLister.Get(name); err == nil && (uid == "" || node.UID == uid) {
		return false, nil
	}
	node, err := c.kubeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", name, err)
	}
	return uid != "" && node.UID != uid, nil
}

// syncSlice deletes the slice if its owner Node is gone. A slice without
// an owner goes when the Node its annotation noted is gone, and gets the
// UID of its Node noted while the Node exists.
func (c *Controller) syncSlice(ctx context.Context, name string) error {
	slice, err := c.sliceLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	owner, ok := nodeOwner(slice)
	if !ok {
		if len(slice.OwnerReferences) > 0 || ptr.Deref(slice.Spec.NodeName, "") == "" {
			return nil
		}
		return c.syncUnowned(ctx, slice)
	}
	gone, err := c.nodeGone(ctx, owner.Name, owner.UID)
	if err != nil || !gone {
		return err
	}
	return c.delete(ctx, slice, "owner Node is gone")
}

// syncUnowned handles a slice of one node without an owner: it notes the
// UID of the Node while there is one, and deletes the slice once a Node it
// noted is gone (deleted while no controller watched).
func (c *Controller) syncUnowned(ctx context.Context, slice *resourcev1.ResourceSlice) error {
	nodeName := *slice.Spec.NodeName
	if node, err := c.nodeLister.Get(nodeName); err == nil {
		if slice.Annotations[NodeUIDAnnotation] == string(node.UID) {
			return nil
		}
		return c.noteNode(ctx, slice, node.UID)
	}
	if _, seen := slice.Annotations[NodeUIDAnnotation]; !seen {
		return nil
	}
	gone, err := c.nodeGone(ctx, nodeName, "")
	if err != nil || !gone {
		return err
	}
	return c.delete(ctx, slice, "node was deleted")
}

// noteNode records the UID of the slice's Node in NodeUIDAnnotation.
func (c *Controller) noteNode(ctx context.Context, slice *resourcev1.ResourceSlice, uid types.UID) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         slice.UID,
		"annotations": map[string]string{NodeUIDAnnotation: string(uid)},
	}})
	if err != nil {
		return err
	}
	_, err = c.resourceClient.ResourceV1().ResourceSlices().Patch(ctx, slice.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or replaced by a slice of the same name that gets its own
		// turn.
		return nil
	}
	if err != nil {
		return fmt.Errorf("note node of slice %s: %w", slice.Name, err)
	}
	klog.FromContext(ctx).V(4).Info("Noted node of slice", "slice", slice.Name, "node", *slice.Spec.NodeName, "nodeUID", uid)
	return nil
}

// syncAddedNode queues the slices without an owner of a node that was
// added, so that they get its UID noted.
func (c *Controller) syncAddedNode(name string) error {
	unowned, err := c.sliceIndexer.ByIndex(slicesByNodeIndex, name)
	if err != nil {
		return err
	}
	for _, obj := range unowned {
		if slice, ok := obj.(*resourcev1.ResourceSlice); ok {
			c.queue.Add(slicePrefix + slice.Name)
		}
	}
	return nil
}

// syncNode deletes the slices of a deleted node: those with its
// spec.nodeName and those it owns.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	gone, err := c.nodeGone(ctx, name, "")
	if err != nil {
		return err
	}
	slices, err := c.sliceLister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, slice := range slices {
		owner, owned := nodeOwner(slice)
		switch {
		case owned && owner.Name == name:
			// The slice's own check compares UIDs: a node registered
			// again under the same name does not own the old slices.
			c.queue.Add(slicePrefix + slice.Name)
		case gone && ptr.Deref(slice.Spec.NodeName, "") == name:
			if err := c.delete(ctx, slice, "node was deleted"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Controller) delete(ctx context.Context, slice *resourcev1.ResourceSlice, reason string) error {
	deleted, err := driver.DeleteSlice(ctx, c.resourceClient, slice)
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete slice %s: %w", slice.Name, err)
	}
	if !deleted {
		// Gone already, or the name holds another slice now.
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Removed stale slice", "slice", slice.Name, "node", ptr.Deref(slice.Spec.NodeName, ""), "reason", reason)
	return nil
}
