package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestApplyExamples: the quickstart's `kubectl apply -f examples/` works
// and every object shows up in `kubectl get`.
func TestApplyExamples(t *testing.T) {
	s := sharedServer(t)
	out := s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples"))
	for _, want := range []string{
		"deviceclass.resource.draplane.dev/gpu.example.com",
		"resourceslice.resource.draplane.dev/node-1-gpu.example.com",
		"resourceclaimtemplate.resource.draplane.dev/one-gpu",
		"pod/gpu-job",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -f examples/ did not handle %s:\n%s", want, out)
		}
	}
	listing := s.MustKubectl(t, "", "get", "deviceclasses,resourceslices,resourceclaimtemplates,pods", "-A")
	for _, want := range []string{"gpu.example.com", "node-1-gpu.example.com", "one-gpu", "gpu-job"} {
		if !strings.Contains(listing, want) {
			t.Errorf("kubectl get ... -A lacks %s:\n%s", want, listing)
		}
	}
	// Applying again is a no-op, client-side and server-side.
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples"))
	s.MustKubectl(t, "", "apply", "--server-side", "--field-manager=quickstart", "--force-conflicts", "-f", filepath.Join(repoRoot, "examples"))
}

// TestNamespaceLifecycle: bootstrap namespaces exist and cannot be
// deleted, nothing is created in a missing namespace, and deleting a
// namespace deletes what is in it.
func TestNamespaceLifecycle(t *testing.T) {
	s := sharedServer(t)
	if out := s.MustKubectl(t, "", "get", "ns", "-o", "name"); !strings.Contains(out, "namespace/default") || !strings.Contains(out, "namespace/kube-system") {
		t.Errorf("bootstrap namespaces missing: %s", out)
	}
	if out, err := s.Kubectl(t, "", "delete", "namespace", "default", "--wait=false"); err == nil || !strings.Contains(out, "may not be deleted") {
		t.Errorf("deleting default: %v: %s", err, out)
	}

	claim := `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: ns-claim
spec:
  devices:
    requests:
    - name: req
      exactly: {deviceClassName: gpu.example.com}
`
	if out, err := s.Kubectl(t, claim, "create", "-n", "no-such-namespace", "-f", "-"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("claim in a missing namespace: %v: %s", err, out)
	}

	s.MustKubectl(t, "", "create", "namespace", "doomed")
	s.MustKubectl(t, claim, "create", "-n", "doomed", "-f", "-")
	s.MustKubectl(t, "", "run", "-n", "doomed", "doomed-pod", "--image=registry.k8s.io/pause:3.10", "--restart=Never")
	s.MustKubectl(t, "", "delete", "namespace", "doomed", "--wait=false")

	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := s.Kubectl(t, "", "get", "namespace", "doomed")
		return err != nil, nil
	})
	if err != nil {
		out, _ := s.Kubectl(t, "", "get", "namespace", "doomed", "-o", "yaml")
		t.Fatalf("namespace doomed still exists after %v:\n%s", pollTimeout, out)
	}
	if out := s.MustKubectl(t, "", "get", "resourceclaims,pods", "-n", "doomed", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("objects left in the deleted namespace: %s", out)
	}
}

// TestCoreLiteKinds: nodes, events, leases and pods with their field
// selectors, as controllers and kubectl users touch them.
func TestCoreLiteKinds(t *testing.T) {
	s := sharedServer(t)
	s.MustKubectl(t, `apiVersion: v1
kind: Node
metadata:
  name: core-node
  labels: {kubernetes.io/hostname: core-node}
`, "create", "-f", "-")
	t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "node", "core-node") })
	s.MustKubectl(t, `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: core-lease
  namespace: kube-system
spec:
  holderIdentity: e2e
  leaseDurationSeconds: 15
`, "create", "-f", "-")
	s.MustKubectl(t, `apiVersion: v1
kind: Event
metadata:
  name: core-event
  namespace: default
involvedObject:
  kind: Node
  name: core-node
reason: Testing
message: an event from the e2e test
type: Normal
`, "create", "-f", "-")
	s.MustKubectl(t, `apiVersion: v1
kind: Pod
metadata:
  name: core-pod
  namespace: default
spec:
  nodeName: core-node
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
`, "create", "-f", "-")
	t.Cleanup(func() {
		_, _ = s.Kubectl(t, "", "delete", "pod", "core-pod", "-n", "default", "--grace-period=0", "--force")
	})

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "nodes", "-o", "name"}, "node/core-node"},
		{[]string{"get", "leases", "-n", "kube-system", "-o", "jsonpath={.items[*].spec.holderIdentity}"}, "e2e"},
		{[]string{"get", "events", "-n", "default", "--field-selector", "involvedObject.name=core-node", "-o", "name"}, "event/core-event"},
		{[]string{"get", "pods", "-A", "--field-selector", "spec.nodeName=core-node", "-o", "name"}, "pod/core-pod"},
		{[]string{"get", "pod", "core-pod", "-n", "default", "-o", "jsonpath={.spec.schedulerName}/{.spec.restartPolicy}"}, "default-scheduler/Always"},
		{[]string{"explain", "pods.spec.resourceClaims"}, "resourceClaimTemplateName"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if out := s.MustKubectl(t, "", tc.args...); !strings.Contains(out, tc.want) {
				t.Errorf("kubectl %s: got %q, want it to contain %q", strings.Join(tc.args, " "), out, tc.want)
			}
		})
	}
}

// TestPodDeletion: with no kubelet, a pod never bound to a node goes at
// once; a bound pod takes the graceful path (deletionTimestamp first).
func TestPodDeletion(t *testing.T) {
	s := sharedServer(t)
	pod := func(name, node string) string {
		manifest := `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: default
spec:
  terminationGracePeriodSeconds: 600
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
`
		if node != "" {
			manifest = strings.Replace(manifest, "spec:\n", "spec:\n  nodeName: "+node+"\n", 1)
		}
		return manifest
	}
	s.MustKubectl(t, pod("unbound-pod", ""), "create", "-f", "-")
	s.MustKubectl(t, "", "delete", "pod", "unbound-pod", "-n", "default", "--wait=false")
	if out, err := s.Kubectl(t, "", "get", "pod", "unbound-pod", "-n", "default"); err == nil {
		t.Errorf("unbound pod still exists after delete:\n%s", out)
	}

	s.MustKubectl(t, pod("bound-pod", "some-node"), "create", "-f", "-")
	t.Cleanup(func() {
		_, _ = s.Kubectl(t, "", "delete", "pod", "bound-pod", "-n", "default", "--grace-period=0", "--force")
	})
	s.MustKubectl(t, "", "delete", "pod", "bound-pod", "-n", "default", "--wait=false")
	out := s.MustKubectl(t, "", "get", "pod", "bound-pod", "-n", "default", "-o", "jsonpath={.metadata.deletionTimestamp}")
	if strings.TrimSpace(out) == "" {
		t.Error("bound pod deleted without a grace period")
	}
}
