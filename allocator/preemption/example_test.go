package preemption_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/preemption"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// A node with two GPUs, both held by batch pods; an inference pod of
// higher priority needs one.
func Example() {
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a-gpus"}}
	slice.Spec.Driver, slice.Spec.NodeName = "gpu.example.com", ptr.To("node-a")
	slice.Spec.Pool = resourceapi.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1}
	slice.Spec.Devices = []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	claim := func(name string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)}}
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
		return c
	}
	allocated := func(name, device, pod string) *resourceapi.ResourceClaim {
		c := claim(name)
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: "gpu.example.com", Pool: "node-a", Device: device}}}}
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID(pod)}}
		return c
	}

	a := allocator.New(allocator.Options{})
	inv := a.Prepare(allocator.Snapshot{Classes: map[string]*resourceapi.DeviceClass{"gpu": class}, Slices: []*resourceapi.ResourceSlice{slice}})
	claims := []*resourceapi.ResourceClaim{allocated("batch-1-gpu", "gpu-0", "batch-1"), allocated("batch-2-gpu", "gpu-1", "batch-2")}
	inUse := allocator.NewInUse()
	for _, c := range claims {
		inUse.AddClaim(c)
	}
	cluster := &preemption.Cluster{
		Allocator: a, Inventory: inv, InUse: inUse, Claims: claims,
		Slices: []*resourceapi.ResourceSlice{slice},
		Pods: []preemption.Pod{
			{UID: "batch-1", Key: "default/batch-1", Priority: 100, Node: "node-a"},
			{UID: "batch-2", Key: "default/batch-2", Priority: 50, Node: "node-a"},
		},
	}
	preemptor := &preemption.Preemptor{
		Priority: 1000,
		Members: []preemption.Member{{
			Key:    "default/inference",
			Claims: []*resourceapi.ResourceClaim{claim("inference-gpu")},
			Nodes:  []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}},
		}},
	}
	d, err := preemption.Find(context.Background(), cluster, preemptor, preemption.Options{})
	if err != nil {
		panic(err)
	}
	for _, v := range d.Victims {
		fmt.Println("evict", v.Key, "priority", v.Priority, "freeing", d.FreedBy[v.UID])
	}
	fmt.Println("nominate", d.Placement[0].Node, "freeing", d.Freed)

	preemptor.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	d, _ = preemption.Find(context.Background(), cluster, preemptor, preemption.Options{})
	fmt.Println(d.Possible, d.Reason)
	// Output:
	// evict default/batch-2 priority 50 freeing [gpu.example.com/node-a/gpu-1]
	// nominate node-a freeing [gpu.example.com/node-a/gpu-1]
	// false preemptionPolicy is Never
}
