package driver

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

func TestRemoveNodeSlices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mk := func(name, driver, node string) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 1}}}
		if node != "" {
			s.Spec.NodeName = ptr.To(node)
		} else {
			s.Spec.AllNodes = ptr.To(true)
		}
		return s
	}
	client := newCountingClient(mk("a-1", "one.example.com", "node-a"), mk("a-2", "gone.example.com", "node-a"),
		mk("b-1", "one.example.com", "node-b"), mk("net", "one.example.com", ""))
	removed, err := RemoveNodeSlices(ctx, client, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if removed.Slices != 2 {
		t.Errorf("removed %d slices, want 2", removed.Slices)
	}
	if g := removed.MinGeneration("one.example.com", "p"); g != 2 {
		t.Errorf("MinGeneration of the removed pool = %d, want 2", g)
	}
	if g := removed.MinGeneration("one.example.com", "other"); g != 0 {
		t.Errorf("MinGeneration of a pool not found = %d, want 0", g)
	}
	var names []string
	for _, s := range client.slices(t) {
		names = append(names, s.Name)
	}
	if len(names) != 2 || names[0] != "b-1" || names[1] != "net" {
		t.Errorf("slices left: %v, want [b-1 net]", names)
	}
}

// TestRemoveDriverSlices: only the node's slices of that driver go.
func TestRemoveDriverSlices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mk := func(name, driver, node string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	}
	client := newCountingClient(mk("a-1", "gone.example.com", "node-a"), mk("a-2", "stays.example.com", "node-a"),
		mk("b-1", "gone.example.com", "node-b"))
	removed, err := RemoveDriverSlices(ctx, client, "node-a", "gone.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if removed != 1 {
		t.Errorf("removed %d slices, want 1", removed)
	}
	var names []string
	for _, s := range client.slices(t) {
		names = append(names, s.Name)
	}
	if len(names) != 2 || names[0] != "a-2" || names[1] != "b-1" {
		t.Errorf("slices left: %v, want [a-2 b-1]", names)
	}
}

// TestDeleteSlice: the delete names the slice's UID, so a slice made again
// under the name is not deleted (the fake clientset does not check
// preconditions; a reactor does what the API server does).
func TestDeleteSlice(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	slice := func(uid types.UID) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: uid}}
	}
	for name, tc := range map[string]struct {
		stored       []runtime.Object
		wantDeleted  bool
		wantConflict bool
	}{
		"there":    {stored: []runtime.Object{slice("old")}, wantDeleted: true},
		"gone":     {},
		"replaced": {stored: []runtime.Object{slice("new")}, wantConflict: true},
	} {
		t.Run(name, func(t *testing.T) {
			client := newCountingClient(tc.stored...)
			client.PrependReactor("delete", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
				pre := action.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
				if pre == nil || pre.UID == nil {
					t.Fatal("delete without a UID precondition")
				}
				if len(tc.stored) > 0 && tc.stored[0].(*resourcev1.ResourceSlice).UID != *pre.UID {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "resource.draplane.dev", Resource: "resourceslices"}, "s", nil)
				}
				return false, nil, nil
			})
			deleted, err := DeleteSlice(ctx, client, slice("old"))
			if deleted != tc.wantDeleted || apierrors.IsConflict(err) != tc.wantConflict || (err != nil && !tc.wantConflict) {
				t.Errorf("DeleteSlice = %v, %v; want deleted %v, conflict %v", deleted, err, tc.wantDeleted, tc.wantConflict)
			}
		})
	}
}
