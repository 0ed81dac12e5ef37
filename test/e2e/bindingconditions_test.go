package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// The tests in this file follow a pod whose device has binding conditions
// (KEP-5007): bound once they are met, placed again when they fail or
// time out.

const (
	// attachDriver is a driver the tests play themselves: its devices
	// on sim-node-0 are ready once the test says so.
	attachDriver   = "attach.example.com"
	condAttached   = "example.com/attached"
	condAttachFail = "example.com/attach-failed"
)

// attachServer starts a server with one simulated node and publishes on
// it one device of attachDriver with binding conditions, and a class for
// it.
func attachServer(t *testing.T, args ...string) (*testServer, kubernetes.Interface) {
	t.Helper()
	s := startServer(t, t.TempDir(), append([]string{"--simulate-nodes=1"}, args...)...)
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	s.MustKubectl(t, fmt.Sprintf(`apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: attachable
spec:
  selectors:
  - cel:
      expression: device.driver == "%[1]s"
---
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: sim-node-0-attach
spec:
  driver: %[1]s
  nodeName: sim-node-0
  pool:
    name: sim-node-0
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: dev-0
    bindingConditions: ["%[2]s"]
    bindingFailureConditions: ["%[3]s"]
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: attach
  namespace: default
spec:
  devices:
    requests:
    - name: dev
      exactly:
        deviceClassName: attachable
`, attachDriver, condAttached, condAttachFail), "apply", "-f", "-")
	waitFor(t, "simulated node Ready", func(ctx context.Context) (bool, error) {
		node, err := kube.CoreV1().Nodes().Get(ctx, "sim-node-0", metav1.GetOptions{})
		return err == nil && len(node.Status.Conditions) > 0 && node.Status.Conditions[0].Status == corev1.ConditionTrue, nil
	})
	return s, kube
}

// createAttachPod creates the pod "attach" that uses the claim "attach".
func createAttachPod(t *testing.T, s *testServer) {
	t.Helper()
	s.MustKubectl(t, claimPodYAML("attach", "dev", "claim=attach"), "apply", "-f", "-")
}

// waitForPodCondition waits until the pod has PodScheduled=False with the
// reason and returns the pod.
func waitForPodCondition(t *testing.T, kube kubernetes.Interface, name, reason string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, "pod "+name+" PodScheduled=False/"+reason, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := findPodCondition(pod, corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == reason, nil
	})
	return pod
}

// waitForEvent waits for an event of the pod with the reason whose
// message contains every part.
func waitForEvent(t *testing.T, kube kubernetes.Interface, pod *corev1.Pod, eventType, reason string, parts ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s event %s %q", eventType, reason, parts), func(ctx context.Context) (bool, error) {
		events, err := podEvents(ctx, kube, pod)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(events, func(e corev1.Event) bool {
			return e.Type == eventType && e.Reason == reason && containsAll(e.Message, parts...)
		}), nil
	})
}

// TestBindingConditionsMet: the claim is allocated and reserved, but the
// pod is not bound while the device's binding condition is not True; the
// pod says what it waits for. Once the driver (here: kubectl) reports the
// condition, the pod is bound and runs.
func TestBindingConditionsMet(t *testing.T) {
	s, kube := attachServer(t)
	ctx := context.Background()
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	createAttachPod(t, s)

	// The controller decided to wait instead of binding: the condition
	// is written in the attempt that allocated, where the pod would
	// otherwise have been bound.
	pod := waitForPodCondition(t, kube, "attach", "BindingConditionsPending")
	message := findPodCondition(pod, corev1.PodScheduled).Message
	if !containsAll(message, condAttached, attachDriver+"/sim-node-0/dev-0", "claim default/attach", "on node sim-node-0", "binding timeout 10m0s") {
		t.Errorf("PodScheduled message does not say what the pod waits for: %q", message)
	}
	claim, err := claims.Get(ctx, "attach", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != 1 || claim.Status.Allocation.AllocationTimestamp == nil {
		t.Fatalf("claim not allocated with a timestamp and reserved while the pod waits: %+v", claim.Status)
	}
	if result := claim.Status.Allocation.Devices.Results[0]; !slices.Equal(result.BindingConditions, []string{condAttached}) {
		t.Errorf("allocation result binding conditions %v", result.BindingConditions)
	}
	waitForEvent(t, kube, pod, corev1.EventTypeNormal, "BindingConditionsPending", "sim-node-0", condAttached)
	pod, err = kube.CoreV1().Pods("default").Get(ctx, "attach", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s before its device's binding condition was met", pod.Spec.NodeName)
	}

	// The driver reports the device attached.
	s.MustKubectl(t, "", "patch", "resourceclaim", "attach", "-n", "default", "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"devices":[{"driver":%q,"pool":"sim-node-0","device":"dev-0","conditions":[{"type":%q,"status":"True","reason":"Attached","message":"attached by the test","lastTransitionTime":%q}]}]}}`,
			attachDriver, condAttached, time.Now().UTC().Format(time.RFC3339)))
	waitFor(t, "pod bound and running", func(ctx context.Context) (bool, error) {
		pod, err = kube.CoreV1().Pods("default").Get(ctx, "attach", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == "sim-node-0" && pod.Status.Phase == corev1.PodRunning, err
	})
	out := s.MustKubectl(t, "", "get", "pod", "attach", "-n", "default", "-o", "jsonpath={.spec.nodeName} {.status.phase}")
	if out != "sim-node-0 Running" {
		t.Errorf("kubectl get pod: %q", out)
	}
}

// TestBindingConditionsTimeout: nobody reports the binding condition;
// after --device-binding-timeout the claim is deallocated (a Warning event
// says why) and the pod is placed again: the claim is allocated anew with
// a later allocationTimestamp. The pod is never bound.
func TestBindingConditionsTimeout(t *testing.T) {
	s, kube := attachServer(t, "--device-binding-timeout=3s")
	ctx := context.Background()
	watcher, err := s.Client(t).ResourceV1().ResourceClaims("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=attach"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	createAttachPod(t, s)

	// allocated are the allocationTimestamps seen, in order; deallocated
	// is set once the claim was seen without allocation after one.
	var allocated []time.Time
	deallocated := false
	deadline := time.After(pollTimeout)
	for !deallocated || len(allocated) < 2 {
		select {
		case event, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("claim watch closed")
			}
			claim, ok := event.Object.(*resourcev1.ResourceClaim)
			if !ok || event.Type == watch.Deleted {
				continue
			}
			switch allocation := claim.Status.Allocation; {
			case allocation != nil && allocation.AllocationTimestamp == nil:
				t.Fatalf("allocation without allocationTimestamp: %+v", allocation)
			case allocation != nil && (len(allocated) == 0 || !allocation.AllocationTimestamp.Time.Equal(allocated[len(allocated)-1])):
				allocated = append(allocated, allocation.AllocationTimestamp.Time)
			case allocation == nil && len(allocated) > 0:
				if len(claim.Status.ReservedFor) > 0 || len(claim.Status.Devices) > 0 {
					t.Errorf("deallocated claim keeps reservedFor %v, devices %v", claim.Status.ReservedFor, claim.Status.Devices)
				}
				deallocated = true
			}
		case <-deadline:
			t.Fatalf("allocations %v, deallocated %v after %v\n%s", allocated, deallocated, pollTimeout, dumpState(t, s, "default"))
		}
	}
	if !allocated[1].After(allocated[0]) {
		t.Errorf("allocated again at %v, not after the first allocation at %v", allocated[1], allocated[0])
	}
	pod, err := kube.CoreV1().Pods("default").Get(ctx, "attach", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, kube, pod, corev1.EventTypeWarning, "BindingConditionsTimeout", "binding conditions timed out on node sim-node-0", condAttached, "not met within 3s")
	if pod.Spec.NodeName != "" {
		t.Errorf("pod bound to %s although its device's binding condition was never met", pod.Spec.NodeName)
	}
}

// TestBindingConditionsFailedPlacesElsewhere runs the flow with the
// simulator alone, as `make run` can: its devices have binding
// conditions, which its driver reports met, except on sim-node-0, where it
// reports the failure condition. The pod's claim is allocated on
// sim-node-0 first (both nodes are empty, the first name wins), then
// deallocated, and the pod is placed on sim-node-1 and runs there.
func TestBindingConditionsFailedPlacesElsewhere(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=1",
		"--simulate-binding-condition="+condAttached, "--simulate-binding-failure-nodes=sim-node-0", "--simulate-binding-delay=0s")
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	client := s.Client(t)
	waitFor(t, "both simulated slices with binding conditions", func(ctx context.Context) (bool, error) {
		slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, slice := range slices.Items {
			if len(slice.Spec.Devices) == 1 && len(slice.Spec.Devices[0].BindingConditions) == 1 {
				n++
			}
		}
		return n == 2, nil
	})
	watcher, err := client.ResourceV1().ResourceClaims("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(repoRoot, "examples", "quickstart", "02-resourceclaimtemplates.yaml"))
	s.MustKubectl(t, claimPodYAML("placed-again", "gpu", "template=one-gpu"), "apply", "-f", "-")

	// The claim's way: the pools it was allocated from, "-" for
	// deallocated.
	var way []string
	want := []string{"sim-node-0", "-", "sim-node-1"}
	var claim *resourcev1.ResourceClaim
	deadline := time.After(pollTimeout)
	for len(way) < len(want) {
		select {
		case event, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("claim watch closed")
			}
			var isClaim bool
			if claim, isClaim = event.Object.(*resourcev1.ResourceClaim); !isClaim || event.Type == watch.Deleted {
				continue
			}
			step := "-"
			if claim.Status.Allocation != nil {
				step = claim.Status.Allocation.Devices.Results[0].Pool
			}
			if (len(way) > 0 || step != "-") && (len(way) == 0 || way[len(way)-1] != step) {
				way = append(way, step)
			}
		case <-deadline:
			t.Fatalf("claim went %v, want %v\n%s", way, want, dumpState(t, s, "default"))
		}
	}
	if !slices.Equal(way, want) {
		t.Fatalf("claim went %v, want %v", way, want)
	}

	var pod *corev1.Pod
	waitFor(t, "pod running on sim-node-1", func(ctx context.Context) (bool, error) {
		pod, err = kube.CoreV1().Pods("default").Get(ctx, "placed-again", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == "sim-node-1" && pod.Status.Phase == corev1.PodRunning, err
	})
	waitForEvent(t, kube, pod, corev1.EventTypeWarning, "BindingConditionsFailed",
		"binding conditions failed on node sim-node-0", "gpu.sim.draplane.dev/sim-node-0/gpu-0", "BindingFailed=True", "scheduled again")
	claim, err = client.ResourceV1().ResourceClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.Status.Devices) != 1 || claim.Status.Devices[0].Pool != "sim-node-1" || !apimeta.IsStatusConditionTrue(claim.Status.Devices[0].Conditions, condAttached) {
		t.Errorf("claim device status %+v, want %s True on sim-node-1", claim.Status.Devices, condAttached)
	}
	if !ptr.Deref(pod.Status.ContainerStatuses[0].Started, false) {
		t.Errorf("container not started: %+v", pod.Status.ContainerStatuses)
	}
}

// TestBindingConditionsGateOff: with --feature-gates
// DRADeviceBindingConditions=false (which the server must accept), a pod
// never waits for binding conditions, as upstream's scheduler with the
// gate off: a device that still lists them after the API stored the
// slice is not allocated (the pod is unschedulable), one whose conditions
// the API dropped is allocated and the pod runs.
func TestBindingConditionsGateOff(t *testing.T) {
	s, kube := attachServer(t, "--feature-gates=DRADeviceBindingConditions=false")
	ctx := context.Background()
	slice, err := s.Client(t).ResourceV1().ResourceSlices().Get(ctx, "sim-node-0-attach", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createAttachPod(t, s)
	if len(slice.Spec.Devices[0].BindingConditions) == 0 {
		waitFor(t, "pod running without binding conditions", func(ctx context.Context) (bool, error) {
			pod, err := kube.CoreV1().Pods("default").Get(ctx, "attach", metav1.GetOptions{})
			return err == nil && pod.Status.Phase == corev1.PodRunning, err
		})
		return
	}
	pod := waitForPodCondition(t, kube, "attach", corev1.PodReasonUnschedulable)
	waitForEvent(t, kube, pod, corev1.EventTypeWarning, "FailedScheduling", "claim default/attach")
	claim, err := s.Client(t).ResourceV1().ResourceClaims("default").Get(ctx, "attach", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation != nil {
		t.Errorf("device with binding conditions allocated with the gate off: %+v", claim.Status.Allocation)
	}
}
