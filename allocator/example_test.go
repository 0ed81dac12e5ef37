package allocator_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// The allocation controller's cycle: prepare the inventory when slices or
// classes change, keep the in-use accounting current, and choose a node for
// each pod.
func Example() {
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	slice := func(node string, devices ...string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}}
		s.Spec.Driver, s.Spec.NodeName = "gpu.example.com", &node
		s.Spec.Pool = resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
		for _, d := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
		}
		return s
	}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	class.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-gpu"}}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}

	a := allocator.New(allocator.Options{Policy: allocator.MostAllocated})
	inv := a.Prepare(allocator.Snapshot{
		Classes: map[string]*resourceapi.DeviceClass{"gpu": class},
		Slices:  []*resourceapi.ResourceSlice{slice("node-a", "gpu-0", "gpu-1"), slice("node-b", "gpu-0", "gpu-1", "gpu-2")},
	})
	inUse := allocator.NewInUse()
	inUse.AddAllocation(&resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "node-b", Device: "gpu-0"}}}})

	nodes := []*corev1.Node{node("node-a"), node("node-b")}
	sel, err := a.SelectNode(context.Background(), inv.State(inUse), []*resourceapi.ResourceClaim{claim}, nodes)
	if err != nil {
		panic(err)
	}
	// Both nodes would be fully used afterwards; the tie goes to node-a.
	fmt.Println(sel.Summary())
	for _, r := range sel.Chosen.Allocations[0].Devices.Results {
		fmt.Println(r.Request, r.Pool, r.Device)
	}
	// The controller records what it allocated before the informer sees it.
	inUse.AddAllocation(sel.Chosen.Allocations[0])

	sel, _ = a.SelectNode(context.Background(), inv.State(inUse), []*resourceapi.ResourceClaim{claim}, nodes)
	fmt.Println(sel.Summary())
	// Output:
	// allocated on node node-a
	// gpu node-a gpu-0
	// gpu node-a gpu-1
	// allocated on node node-b
}
