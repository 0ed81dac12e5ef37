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

// RemoveNodeSlices deletes every ResourceSlice of the node, of every
// driver. A node agent calls it when it starts, before its drivers publish
// again: a driver that was removed while the node was down leaves no
// orphan behind. It returns how many slices it deleted.
func RemoveNodeSlices(ctx context.Context, client versioned.Interface, nodeName string) (int, error) {
	if nodeName == "" {
		return 0, fmt.Errorf("no node name")
	}
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, nodeName).String(),
	})
	if err != nil {
		return 0, fmt.Errorf("list slices of node %s: %w", nodeName, err)
	}
	removed := 0
	for i := range list.Items {
		slice := &list.Items[i]
		if ptr.Deref(slice.Spec.NodeName, "") != nodeName {
			continue
		}
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
			removed++
		}
	}
	if removed > 0 {
		klog.FromContext(ctx).Info("Removed the slices of the node before publishing again", "node", nodeName, "slices", removed)
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
