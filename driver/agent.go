package driver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// Removed is what RemoveNodeSlices removed.
type Removed struct {
	// Slices is how many slices it deleted.
	Slices int
	// Generations are the highest pool generations of the slices it
	// found, by driver and pool name.
	Generations map[string]map[string]int64
}

// MinGeneration is the generation a driver's pool is published with
// after the clean start (Pool.MinGeneration): one above the highest that
// was removed, so that a consumer that missed the deletes takes the new
// slices as newer. 0 if no slice of the pool was found.
func (r Removed) MinGeneration(driverName, poolName string) int64 {
	if g, ok := r.Generations[driverName][poolName]; ok {
		return g + 1
	}
	return 0
}

// RemoveNodeSlices deletes every ResourceSlice of the node, of every
// driver. A node agent calls it when it starts, before its drivers publish
// again: a driver that was removed while the node was down leaves no
// orphan behind. It returns how many slices it deleted and the
// generations their pools had.
func RemoveNodeSlices(ctx context.Context, client versioned.Interface, nodeName string) (Removed, error) {
	removed, err := removeSlices(ctx, client, nodeName, "")
	if removed.Slices > 0 {
		klog.FromContext(ctx).Info("Removed the slices of the node before publishing again", "node", nodeName, "slices", removed.Slices)
	}
	return removed, err
}

// RemoveDriverSlices deletes the node's ResourceSlices of one driver, as
// a kubelet does when the driver's plugin deregistered and did not come
// back in time. It returns how many slices it deleted.
func RemoveDriverSlices(ctx context.Context, client versioned.Interface, nodeName, driverName string) (int, error) {
	if driverName == "" {
		return 0, fmt.Errorf("no driver name")
	}
	removed, err := removeSlices(ctx, client, nodeName, driverName)
	return removed.Slices, err
}

// removeSlices deletes the node's slices, of one driver or (driverName
// empty) of every driver.
func removeSlices(ctx context.Context, client versioned.Interface, nodeName, driverName string) (Removed, error) {
	removed := Removed{Generations: map[string]map[string]int64{}}
	if nodeName == "" {
		return removed, fmt.Errorf("no node name")
	}
	selector := fields.Set{resourceapi.ResourceSliceSelectorNodeName: nodeName}
	if driverName != "" {
		selector[resourceapi.ResourceSliceSelectorDriver] = driverName
	}
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector.AsSelector().String()})
	if err != nil {
		return removed, fmt.Errorf("list slices of node %s: %w", nodeName, err)
	}
	for i := range list.Items {
		slice := &list.Items[i]
		if ptr.Deref(slice.Spec.NodeName, "") != nodeName || driverName != "" && slice.Spec.Driver != driverName {
			continue
		}
		pools := removed.Generations[slice.Spec.Driver]
		if pools == nil {
			pools = map[string]int64{}
			removed.Generations[slice.Spec.Driver] = pools
		}
		pools[slice.Spec.Pool.Name] = max(pools[slice.Spec.Pool.Name], slice.Spec.Pool.Generation)
		deleted, err := DeleteSlice(ctx, client, slice)
		if apierrors.IsForbidden(err) {
			// A node identity removes only the slices of the drivers it
			// holds (auth/node); another driver's slices are its own.
			klog.FromContext(ctx).Info("Leaving a slice of the node that this identity may not remove", "slice", slice.Name, "driver", slice.Spec.Driver, "err", err)
			continue
		}
		if err != nil && !apierrors.IsConflict(err) {
			return removed, fmt.Errorf("remove slice %s of node %s: %w", slice.Name, nodeName, err)
		}
		if deleted {
			removed.Slices++
		}
	}
	return removed, nil
}

// DeleteSlice deletes the slice on the condition that its name still holds
// this slice (the same UID): a slice made again under the name since is
// left alone, and the API answers with a Conflict error
// (apierrors.IsConflict) that the caller may pass over. A slice that is
// gone already is no error. It reports whether this call deleted the
// slice.
func DeleteSlice(ctx context.Context, client versioned.Interface, slice *resourcev1.ResourceSlice) (bool, error) {
	err := client.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &slice.UID},
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
