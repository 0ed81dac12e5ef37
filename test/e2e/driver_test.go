package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/test/launcher"
)

const (
	exampleDriver     = "gpu.example.com"
	exampleDriverNode = "driver-node-0"
)

// TestExampleDriver runs cmd/example-driver as its own process next to the
// server: it publishes its node's devices, a pod with a claim lands on the
// node and the driver logs the prepare; a claim the driver fails to
// prepare keeps its pod from Running with an event naming the claim and
// the error; a restarted driver replaces the node's stale slices without
// duplicating its own; a deleted node's slices disappear. The driver runs
// with its node's identity (user draplane:node:<node>), not the admin's.
func TestExampleDriver(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	binary := filepath.Join(t.TempDir(), "example-driver")
	if err := launcher.Build("./cmd/example-driver", binary); err != nil {
		t.Fatal(err)
	}
	drv := &launcher.Process{Name: "example-driver", Binary: binary,
		Args: []string{"--kubeconfig", mintKubeconfig(t, s, "draplane:node:"+exampleDriverNode, "draplane:nodes", "draplane:driver:"+exampleDriver),
			"--node-name", exampleDriverNode, "--devices", "2",
			"--checkpoint", filepath.Join(t.TempDir(), "checkpoint.json"), "-v", "2"},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	slices := s.Client(t).ResourceV1().ResourceSlices()
	nodeSlices := func() []resourcev1.ResourceSlice {
		t.Helper()
		list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", exampleDriverNode).String()})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(pollTimeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %v\ndriver output:\n%s\n%s", what, pollTimeout, launcher.Tail(drv.Output(), 40),
					s.MustKubectl(t, "", "get", "nodes,pods,resourceslices,resourceclaims,events", "-A", "-o", "wide"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	onePublished := func() bool {
		items := nodeSlices()
		return len(items) == 1 && items[0].Spec.Driver == exampleDriver && len(items[0].Spec.Devices) == 2 &&
			len(items[0].OwnerReferences) == 1 && items[0].OwnerReferences[0].Kind == "Node"
	}
	eventually("the driver publishes one slice with its 2 devices, owned by its Node", onePublished)

	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: good
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: broken
  namespace: default
  annotations:
    example.draplane.dev/prepare-error: "device is on fire"
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
`, "apply", "-f", "-")
	s.MustKubectl(t, claimPodYAML("uses-good", "gpu", "claim=good")+"---\n"+claimPodYAML("uses-broken", "gpu", "claim=broken"), "apply", "-f", "-")

	phase := func(name string) (corev1.PodPhase, string) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Status.Phase, p.Spec.NodeName
	}
	eventually("the pod with the good claim runs on the driver's node", func() bool {
		p, node := phase("uses-good")
		return p == corev1.PodRunning && node == exampleDriverNode
	})
	eventually("the driver logs the prepare", func() bool {
		return strings.Contains(drv.Output(), `"Prepared claim" driver="gpu.example.com" node="driver-node-0" claim="default/good"`)
	})
	eventually("the failed prepare is an event on the pod naming the claim and the error", func() bool {
		events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "uses-broken" && e.Reason == "FailedPrepareDynamicResources" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, "claim broken") && strings.Contains(e.Message, "device is on fire") {
				return true
			}
		}
		return false
	})
	if p, node := phase("uses-broken"); p == corev1.PodRunning || node != exampleDriverNode {
		t.Errorf("pod with the broken claim is %s on %q, want not Running on %s", p, node, exampleDriverNode)
	}

	// The driver stops; meanwhile a slice of a pool it no longer has is
	// left on the node. The restarted node agent removes it and
	// publishes its own once. (Its node identity may remove only its own
	// driver's slices: another driver's are that driver's.)
	drv.Stop()
	if _, err := slices.Create(ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec: resourcev1.ResourceSliceSpec{Driver: exampleDriver, NodeName: ptr.To(exampleDriverNode),
			Pool: resourcev1.ResourcePool{Name: "retired-pool", Generation: 1, ResourceSliceCount: 1}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually("after the restart only the driver's one slice is left", func() bool {
		return onePublished() && strings.Contains(drv.Output(), "Published the node's devices")
	})
	if items := nodeSlices(); items[0].Spec.Pool.Generation < 1 {
		t.Errorf("republished pool generation %d", items[0].Spec.Pool.Generation)
	}

	// The node goes: its slices go with it.
	drv.Stop()
	s.MustKubectl(t, "", "delete", "node", exampleDriverNode)
	eventually("the deleted node's slices are removed", func() bool { return len(nodeSlices()) == 0 })
}
