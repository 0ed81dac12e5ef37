package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// alphaSlice uses skipNodeOperations, partitionTypeAttribute and a list
// attribute; its device consumes counters of a second slice of the pool.
const alphaSlice = `
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: %s
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: %s, generation: 1, resourceSliceCount: 1}
  skipNodeOperations: ["*"]
  partitionTypeAttribute: gpu.example.com/profile
  devices:
  - name: gpu-0
    attributes:
      profile: {string: Full}
      cores: {ints: [0, 1]}
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 1Gi}}
`

const derivedClaim = `
apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: %s
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        derivedAttributes:
        - {name: derived/numa, expression: '1'}
    constraints:
    - matchAttribute: derived/numa
`

// TestAlphaFieldGates drives the real binary with kubectl: with the
// default gates (alpha off) the alpha fields of a slice are dropped, with
// --feature-gates turning them on they are stored; a claim with
// derivedAttributes is stored without them while the gate is off and
// refused with a 422 naming the field while it is on. kubectl explain
// shows the fields either way.
func TestAlphaFieldGates(t *testing.T) {
	off := sharedServer(t)
	on := startServer(t, t.TempDir(), "--controllers=false",
		"--feature-gates=DRAOptionalNodeOperations=true,DRAPartitionableDevicesType=true,DRAListTypeAttributes=true,DRADerivedAttributes=true")

	for _, tc := range []struct {
		name   string
		server *testServer
		stored bool
	}{
		{"gates-off", off, false},
		{"gates-on", on, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "alpha-" + tc.name
			slice := fmt.Sprintf(alphaSlice, name, name)
			out, err := tc.server.Kubectl(t, slice, "apply", "-f", "-")
			if !tc.stored {
				// Without the list value the attribute has none: refused,
				// naming it, as upstream does.
				if err == nil || !strings.Contains(out, "spec.devices[0].attributes[cores]") {
					t.Fatalf("apply with the list attribute and its gate off: %v\n%s", err, out)
				}
				slice = strings.Replace(slice, "      cores: {ints: [0, 1]}\n", "", 1)
				tc.server.MustKubectl(t, slice, "apply", "-f", "-")
			}
			got := tc.server.MustKubectl(t, "", "get", "resourceslice", name, "-o",
				`jsonpath={.spec.skipNodeOperations}|{.spec.partitionTypeAttribute}|{.spec.devices[0].attributes.cores.ints}`)
			want := "||"
			if tc.stored {
				want = `["*"]|gpu.example.com/profile|[0,1]`
			}
			if got != want {
				t.Errorf("stored %q, want %q", got, want)
			}
			got = tc.server.MustKubectl(t, "", "get", "resourceslices.v1beta1.resource.draplane.dev", name, "-o",
				`jsonpath={.spec.skipNodeOperations}|{.spec.partitionTypeAttribute}|{.spec.devices[0].basic.attributes.cores.ints}`)
			if got != want {
				t.Errorf("read as v1beta1: %q, want %q", got, want)
			}

			out, err = tc.server.Kubectl(t, fmt.Sprintf(derivedClaim, name), "create", "-f", "-")
			if tc.stored {
				if err == nil || !strings.Contains(out, "spec.devices.requests[0].exactly.derivedAttributes") || !strings.Contains(out, "not supported yet") {
					t.Errorf("claim with derivedAttributes and its gate on: %v\n%s", err, out)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := tc.server.MustKubectl(t, "", "get", "resourceclaim", "-n", "default", name, "-o", "jsonpath={.spec.devices.requests[0].exactly.derivedAttributes}"); got != "" {
					t.Errorf("derivedAttributes stored with the gate off: %s", got)
				}
			}

			for field, want := range map[string]string{
				"resourceslices.spec.skipNodeOperations":                         "NodePrepareResources",
				"resourceslices.spec.devices.nodeAllocatableResources":           "overhead",
				"resourceslices.spec.devices.consumesCounters":                   "compatibilityGroups",
				"resourceslices.spec.devices.attributes":                         "versions",
				"resourceclaims.spec.devices.requests.exactly.derivedAttributes": "expression",
				"resourceclaims.status.allocation.devices.results":               "skipNodeOperations",
			} {
				if out := tc.server.MustKubectl(t, "", "explain", field); !strings.Contains(out, want) {
					t.Errorf("kubectl explain %s lacks %q:\n%s", field, want, out)
				}
			}
		})
	}
}

// TestDeviceTaintRulesGateOff: with --feature-gates=DRADeviceTaintRules=false
// DeviceTaintRules are still served (so that they can be cleaned up, as
// upstream), but taint nothing: a pod whose only possible device is
// under a NoExecute rule gets it and runs, the pool counts the device as
// allocated and not tainted, and the rule gets no status.
func TestDeviceTaintRulesGateOff(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=1", "--simulate-devices-per-node=1",
		"--feature-gates=DRADeviceTaintRules=false")
	ctx := context.Background()
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(repoRoot, "examples", "quickstart", "02-resourceclaimtemplates.yaml"))
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: gate-off-broken
spec:
  deviceSelector:
    driver: gpu.sim.draplane.dev
    pool: sim-node-0
  taint:
    key: broken
    effect: NoExecute
`, "apply", "-f", "-")
	if got := s.MustKubectl(t, "", "get", "devicetaintrules", "gate-off-broken", "-o", "jsonpath={.spec.taint.effect}"); got != "NoExecute" {
		t.Fatalf("rule read back with effect %q", got)
	}
	s.MustKubectl(t, claimPodYAML("gate-off-pod", "gpu", "template=one-gpu"), "apply", "-f", "-")

	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "gate-off-pod", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == "sim-node-0" && pod.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("pod on the device of the rule never ran:\n%s", s.MustKubectl(t, "", "get", "pods,resourceclaims", "-o", "wide"))
	}
	client := s.Client(t)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.ResourceV1().ResourcePoolUsages().Get(ctx, "gpu.sim.draplane.dev:sim-node-0", metav1.GetOptions{})
		return err == nil && p.Status.Devices.Allocated == 1, nil
	}); err != nil {
		t.Fatalf("pool never counted the allocation:\n%s", s.MustKubectl(t, "", "get", "resourcepools", "-o", "yaml"))
	}
	p, err := client.ResourceV1().ResourcePoolUsages().Get(ctx, "gpu.sim.draplane.dev:sim-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Devices.Tainted != 0 {
		t.Errorf("pool counts %d tainted devices with the rules' gate off", p.Status.Devices.Tainted)
	}
	rule, err := client.ResourceV1().DeviceTaintRules().Get(ctx, "gate-off-broken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rule.Status.Conditions) > 0 {
		t.Errorf("rule got a status with its gate off: %+v", rule.Status.Conditions)
	}
	// Served for clean-up: the rule can be deleted.
	s.MustKubectl(t, "", "delete", "devicetaintrule", "gate-off-broken")
}

// TestSimulatedSkipNodeOperations: with DRAOptionalNodeOperations on and
// --simulate-skip-node-operations=*, the simulated slices carry
// skipNodeOperations, an allocation copies it into the claim's result,
// and the simulated node starts the pod without preparing the claim.
func TestSimulatedSkipNodeOperations(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=1", "--simulate-devices-per-node=1",
		"--feature-gates=DRAOptionalNodeOperations=true", "--simulate-skip-node-operations=*")
	ctx := context.Background()
	if got := s.MustKubectl(t, "", "get", "resourceslices", "-o", "jsonpath={.items[*].spec.skipNodeOperations}"); got != `["*"]` {
		t.Fatalf("simulated slice skipNodeOperations %q", got)
	}
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(repoRoot, "examples", "quickstart", "02-resourceclaimtemplates.yaml"))
	s.MustKubectl(t, claimPodYAML("skip-pod", "gpu", "template=one-gpu"), "apply", "-f", "-")
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "skip-pod", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("pod never ran:\n%s", s.MustKubectl(t, "", "get", "pods,resourceclaims", "-o", "wide"))
	}
	got := s.MustKubectl(t, "", "get", "resourceclaims", "-n", "default", "-o", "jsonpath={.items[*].status.allocation.devices.results[*].skipNodeOperations}")
	if got != `["*"]` {
		t.Errorf("allocation result skipNodeOperations %q", got)
	}
}
