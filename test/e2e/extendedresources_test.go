package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestExtendedResources: pods that ask for an extended resource backed by
// a DeviceClass (its extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>) in their containers'
// resources get one claim made for them, allocated on one node, recorded
// in status.extendedResourceClaimStatus, shown by kubectl describe and
// deleted with the pod; a pod asking for more than any node has stays
// Pending and says why.
func TestExtendedResources(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=3")
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: gpu.sim.draplane.dev
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel:
      expression: device.driver == "gpu.sim.draplane.dev"
`, "apply", "-f", "-")

	t.Run("two devices on one node", func(t *testing.T) {
		s.MustKubectl(t, extendedResourcePod("two-gpus", "", "containers", "main", "example.com/gpu", "2"), "apply", "-f", "-")
		s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/two-gpus", "--timeout=60s")
		pod, claim := extendedResourceClaimOf(ctx, t, kube, s, "two-gpus")
		wantMappings := []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}
		if fmt.Sprint(pod.Status.ExtendedResourceClaimStatus.RequestMappings) != fmt.Sprint(wantMappings) {
			t.Errorf("request mappings %+v, want %+v", pod.Status.ExtendedResourceClaimStatus.RequestMappings, wantMappings)
		}
		if !strings.HasPrefix(claim.Name, "two-gpus-extended-resources-") {
			t.Errorf("claim name %q lacks the <pod>-extended-resources- prefix", claim.Name)
		}
		if claim.Annotations["resource.kubernetes.io/extended-resource-claim"] != "true" {
			t.Errorf("claim annotations %v lack resource.kubernetes.io/extended-resource-claim=true", claim.Annotations)
		}
		if len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0].UID != pod.UID {
			t.Errorf("claim owners %+v, want the pod", claim.OwnerReferences)
		}
		expectDevicesOnNode(t, claim, pod, 2)

		describe := s.MustKubectl(t, "", "describe", "pod", "two-gpus")
		for _, want := range []string{"example.com/gpu:  2", "CreatedExtendedResourceClaim", claim.Name} {
			if !strings.Contains(describe, want) {
				t.Errorf("kubectl describe pod lacks %q:\n%s", want, describe)
			}
		}

		s.MustKubectl(t, "", "delete", "pod", "two-gpus", "--grace-period=1")
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("claim %s not deleted with its pod: %v\n%s", claim.Name, err, dumpState(t, s, "default"))
		}
	})

	t.Run("containers and init containers add up", func(t *testing.T) {
		// The init container runs before the others: it uses their two
		// devices and one more. Upstream asks for 3 in all, not 5.
		name := "deviceclass.resource.kubernetes.io/gpu.sim.draplane.dev"
		manifest := extendedResourcePod("mixed", "", "initContainers", "init", name, "3") +
			"  - name: a\n    image: busybox\n    resources:\n      limits:\n        " + name + ": 1\n" +
			"  - name: b\n    image: busybox\n    resources:\n      limits:\n        " + name + ": 1\n"
		s.MustKubectl(t, manifest, "apply", "-f", "-")
		s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/mixed", "--timeout=60s")
		pod, claim := extendedResourceClaimOf(ctx, t, kube, s, "mixed")
		counts := map[string]int64{}
		for _, request := range claim.Spec.Devices.Requests {
			counts[request.Name] = request.Exactly.Count
		}
		wantCounts := map[string]int64{"container-0-request-0": 1, "container-1-request-0": 1, "container-2-request-0": 1}
		if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
			t.Errorf("claim requests %v, want %v", counts, wantCounts)
		}
		if got := len(pod.Status.ExtendedResourceClaimStatus.RequestMappings); got != 5 {
			t.Errorf("%d request mappings, want 5 (a, b, and init to all three requests): %+v", got, pod.Status.ExtendedResourceClaimStatus.RequestMappings)
		}
		expectDevicesOnNode(t, claim, pod, 3)
	})

	t.Run("more than any node has", func(t *testing.T) {
		s.MustKubectl(t, extendedResourcePod("too-many", "", "containers", "main", "example.com/gpu", "4"), "apply", "-f", "-")
		var message string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			pod, err := kube.CoreV1().Pods("default").Get(ctx, "too-many", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.Spec.NodeName != "" {
				return false, fmt.Errorf("pod bound to %s", pod.Spec.NodeName)
			}
			if c := findPodCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Message != "" {
				message = c.Message
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("pod not unschedulable: %v\n%s", err, dumpState(t, s, "default"))
		}
		if !strings.Contains(message, "0/2 nodes fit") {
			t.Errorf("PodScheduled message %q lacks the allocator's summary", message)
		}
		pod, claim := extendedResourceClaimOf(ctx, t, kube, s, "too-many")
		if claim.Status.Allocation != nil {
			t.Errorf("claim allocated: %+v", claim.Status.Allocation)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			events, err := podEvents(ctx, kube, pod)
			return err == nil && warningWith(events, "FailedScheduling", "claim default/"+claim.Name, "container-0-request-0", "NoDevices", "needs 4 devices") != nil, err
		})
		if err != nil {
			t.Fatalf("no FailedScheduling event with the allocator's reason: %v\n%s", err, s.MustKubectl(t, "", "describe", "pod", "too-many"))
		}
	})
}

// extendedResourcePod is a pod manifest whose first container of the
// list ("containers" or "initContainers") asks for quantity of the
// resource; more containers may be appended to that list. With
// initContainers, the manifest ends in an open containers list.
func extendedResourcePod(name, node, list, container, resourceName, quantity string) string {
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  %s:
  - name: %s
    image: busybox
    resources:
      limits:
        %s: %s
`, name, list, container, resourceName, quantity)
	if node != "" {
		manifest += "  nodeName: " + node + "\n"
	}
	if list == "initContainers" {
		manifest += "  containers:\n"
	}
	return manifest
}

// extendedResourceClaimOf waits until the pod records the claim for its
// extended resources and returns both.
func extendedResourceClaimOf(ctx context.Context, t *testing.T, kube kubernetes.Interface, s *testServer, name string) (*corev1.Pod, *resourcev1.ResourceClaim) {
	t.Helper()
	var pod *corev1.Pod
	var claim *resourcev1.ResourceClaim
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.Status.ExtendedResourceClaimStatus == nil {
			return false, err
		}
		claim, err = s.Client(t).ResourceV1().ResourceClaims("default").Get(ctx, pod.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s has no claim for its extended resources: %v\n%s", name, err, dumpState(t, s, "default"))
	}
	return pod, claim
}

// expectDevicesOnNode: the claim is allocated n devices of the pod's
// node and reserved for the pod.
func expectDevicesOnNode(t *testing.T, claim *resourcev1.ResourceClaim, pod *corev1.Pod, n int) {
	t.Helper()
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != n {
		t.Fatalf("claim %s not allocated %d devices: %+v", claim.Name, n, claim.Status.Allocation)
	}
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Pool != pod.Spec.NodeName {
			t.Errorf("device %s/%s is not of the pod's node %s", result.Pool, result.Device, pod.Spec.NodeName)
		}
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != pod.UID {
		t.Errorf("claim reserved for %+v, want the pod", claim.Status.ReservedFor)
	}
}
