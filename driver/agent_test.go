package driver

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if removed != 2 {
		t.Errorf("removed %d slices, want 2", removed)
	}
	var names []string
	for _, s := range client.slices(t) {
		names = append(names, s.Name)
	}
	if len(names) != 2 || names[0] != "b-1" || names[1] != "net" {
		t.Errorf("slices left: %v, want [b-1 net]", names)
	}
}
