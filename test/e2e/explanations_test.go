package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestUnallocatableClaimsAreExplained runs the controllers against pools
// and requests that must not be allocated, and reads why from the pod's
// PodScheduled condition: the claim stays unallocated and the reason names
// the real cause.
func TestUnallocatableClaimsAreExplained(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	client := s.Client(t).ResourceV1()

	// setup makes a ready node, a class for one driver and a claim of one
	// request of that class in namespace default.
	setup := func(t *testing.T, node, driver string, request resourcev1.DeviceRequest) {
		t.Helper()
		s.MustKubectl(t, fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels:\n    kubernetes.io/hostname: %s\n", node, node), "apply", "-f", "-")
		s.MustKubectl(t, "", "patch", "node", node, "--subresource=status", "--type=merge",
			"-p", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Test","message":"test node"}]}}`)
		if _, err := client.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: driver},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
			}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		request.Exactly.DeviceClassName = driver
		if _, err := client.ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice := func(name, node, driver, pool string, generation, count int64, devices ...string) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: driver, NodeName: &node,
				Pool: resourcev1.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: count},
			},
		}
		for _, d := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
		}
		return s
	}
	createSlices := func(t *testing.T, slices ...*resourcev1.ResourceSlice) {
		t.Helper()
		for _, sl := range slices {
			if _, err := client.ResourceSlices().Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// createPod makes a pod on the node (by node selector, not nodeName)
	// that uses the claim named like the node.
	createPod := func(t *testing.T, node string) {
		t.Helper()
		s.MustKubectl(t, claimPodYAML(node, "dev", "claim="+node, "nodeSelector:", "  kubernetes.io/hostname: "+node), "apply", "-f", "-")
	}
	// unschedulable waits for the pod's PodScheduled=False message; it
	// fails at once if the claim gets allocated instead.
	unschedulable := func(t *testing.T, name string) string {
		t.Helper()
		var message string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			claim, err := client.ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if claim.Status.Allocation != nil {
				return false, fmt.Errorf("claim allocated: %+v", claim.Status.Allocation.Devices.Results)
			}
			pod, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
					message = c.Message
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		t.Logf("PodScheduled=False: %s", message)
		return message
	}

	t.Run("pool with more slices than it announces", func(t *testing.T) {
		const node, driver = "pool-node", "pool.example.com"
		setup(t, node, driver, exactRequest("dev", ""))
		// Two publishers of one pool, both at generation 1, each saying
		// the pool has one slice.
		createSlices(t,
			slice("pool-a", node, driver, "shared", 1, 1, "dev-a"),
			slice("pool-b", node, driver, "shared", 1, 1, "dev-b"))
		createPod(t, node)
		message := unschedulable(t, node)
		want := "pool pool.example.com/shared is incomplete: 2 ResourceSlices of generation 1 are visible but the pool announces resourceSliceCount 1"
		if !strings.Contains(message, want) {
			t.Errorf("message %q does not contain %q", message, want)
		}

		// Once one publisher is gone, the pool is complete and used.
		if err := client.ResourceSlices().Delete(ctx, "pool-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			claim, err := client.ResourceClaims("default").Get(ctx, node, metav1.GetOptions{})
			return err == nil && claim.Status.Allocation != nil, err
		}); err != nil {
			t.Fatalf("claim not allocated from the complete pool: %v", err)
		}
		claim, err := client.ResourceClaims("default").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := claim.Status.Allocation.Devices.Results; len(got) != 1 || got[0].Device != "dev-a" {
			t.Errorf("allocated %+v, want dev-a", got)
		}
	})

	t.Run("allocationMode All with more devices than a result holds", func(t *testing.T) {
		const node, driver = "all-node", "all.example.com"
		request := exactRequest("dev", "")
		request.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
		setup(t, node, driver, request)
		var devices []string
		for i := range 40 {
			devices = append(devices, fmt.Sprintf("dev-%02d", i))
		}
		createSlices(t, slice("all-slice", node, driver, "all", 1, 1, devices...))
		createPod(t, node)
		message := unschedulable(t, node)
		want := "allocationMode All needs all 40 matching devices, but an allocation holds at most 32"
		if !strings.Contains(message, want) {
			t.Errorf("message %q does not contain %q", message, want)
		}
		if strings.Contains(message, "not enough remain") {
			t.Errorf("message %q blames other requests; the claim has only one", message)
		}
	})
}
