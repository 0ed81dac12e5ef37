package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/draplane/draplane/test/launcher"
)

// groupClaimSetup is a network-attached device (a slice for all nodes)
// of the simulated driver, a DeviceClass for it and a template for a
// claim of it, and a class and template for one of the simulated GPUs
// (which are node-local).
const groupClaimSetup = `apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: fabric
spec:
  driver: gpu.sim.draplane.dev
  allNodes: true
  pool:
    name: fabric
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: fabric-0
    attributes:
      model:
        string: fabric
---
apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: fabric.sim.draplane.dev
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.sim.draplane.dev" && device.attributes["gpu.sim.draplane.dev"].model == "fabric"
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: fabric
spec:
  spec:
    devices:
      requests:
      - name: fabric
        exactly:
          deviceClassName: fabric.sim.draplane.dev
---
apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: gpu-only.sim.draplane.dev
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.sim.draplane.dev" && device.attributes["gpu.sim.draplane.dev"].model != "fabric"
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu-only.sim.draplane.dev
`

// groupClaimYAML is a gang PodGroup whose claim "fabric" comes from the
// template, and its pods, each of which names the group's claim and has
// a GPU of its own.
func groupClaimYAML(group string, minCount, pods int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: %s
spec:
  schedulingPolicy:
    gang:
      minCount: %d
  resourceClaims:
  - name: fabric
    resourceClaimTemplateName: fabric
`, group, minCount)
	for i := 0; i < pods; i++ {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata:
  name: %s-%d
  labels:
    group: %s
spec:
  schedulingGroup:
    podGroupName: %s
  resourceClaims:
  - name: fabric
    resourceClaimTemplateName: fabric
  - name: gpu
    resourceClaimTemplateName: one-gpu
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: fabric
      - name: gpu
`, group, i, group, group)
	}
	return b.String()
}

// TestGroupClaimShared: a PodGroup's claim from a template is generated
// once for the group (owned by it, named in its status), allocated once
// and reserved for the PodGroup as one consumer, and 300 pods (more than
// the 256 consumers reservedFor takes) run with it in their status, each
// with a GPU of its own: ten nodes of 30 GPUs, all used, with the
// network-attached device reachable from each. When the group and its
// pods are deleted, the claim is deallocated and deleted.
func TestGroupClaimShared(t *testing.T) {
	requireKubectl(t)
	const pods = 300
	s := startServer(t, t.TempDir(), "--simulate-nodes=10", "--simulate-devices-per-node=30", gangGates)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(launcher.Tail(s.Output(), 60))
		}
	})
	s.MustKubectl(t, groupClaimSetup, "apply", "-f", "-")
	start := time.Now()
	s.MustKubectl(t, groupClaimYAML("wide", 4, pods), "create", "-f", "-")
	created := time.Since(start)
	// One list per poll: kubectl wait watches the pods one after the
	// other, which takes longer than placing them.
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		out := s.MustKubectl(t, "", "get", "pods", "-l", "group=wide", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return strings.Count(out, "True") == pods, nil
	})
	if err != nil {
		t.Fatalf("%d pods ready: %v\n%s", pods, err, dumpState(t, s, "default"))
	}
	t.Logf("%d pods created in %v, all ready after %v", pods, created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	var claims []string
	all := strings.Fields(s.MustKubectl(t, "", "get", "resourceclaims", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`))
	for _, name := range all {
		if strings.HasPrefix(name, "wide-fabric-") {
			claims = append(claims, name)
		}
	}
	if len(claims) != 1 || len(all) != pods+1 {
		t.Fatalf("claims %v of %d, want one named wide-fabric-* and one per pod\n%s", claims, len(all), dumpState(t, s, "default"))
	}
	claim := claims[0]
	if owner := s.MustKubectl(t, "", "get", "resourceclaim", claim, "-o", `jsonpath={.metadata.ownerReferences[?(@.controller==true)].apiVersion}/{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].name}`); owner != "scheduling.k8s.io/v1beta1/PodGroup/wide" {
		t.Errorf("claim owner %q, want the PodGroup", owner)
	}
	reservedFor := s.MustKubectl(t, "", "get", "resourceclaim", claim, "-o", `jsonpath={range .status.reservedFor[*]}{.apiGroup}/{.resource}/{.name}{"\n"}{end}`)
	if consumers := strings.Fields(reservedFor); len(consumers) != 1 || consumers[0] != "scheduling.k8s.io/podgroups/wide" {
		t.Errorf("reservedFor %v, want only the PodGroup", consumers)
	}
	if device := s.MustKubectl(t, "", "get", "resourceclaim", claim, "-o", `jsonpath={.status.allocation.devices.results[*].device}`); device != "fabric-0" {
		t.Errorf("claim allocated %q, want fabric-0", device)
	}
	if status := s.MustKubectl(t, "", "get", "podgroup", "wide", "-o", `jsonpath={.status.resourceClaimStatuses[0].name}={.status.resourceClaimStatuses[0].resourceClaimName}`); status != "fabric="+claim {
		t.Errorf("PodGroup status.resourceClaimStatuses %q, want fabric=%s", status, claim)
	}
	out := s.MustKubectl(t, "", "get", "pods", "-l", "group=wide", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.resourceClaimStatuses[?(@.name=="fabric")].resourceClaimName}={.status.phase}={.spec.nodeName}{"\n"}{end}`)
	lines := strings.Fields(out)
	nodes := map[string]bool{}
	for _, line := range lines {
		parts := strings.Split(line, "=")
		if len(parts) != 4 || parts[1] != claim || parts[2] != "Running" {
			t.Errorf("pod %s: want the group's claim %s, Running, got %s", parts[0], claim, line)
		}
		nodes[parts[len(parts)-1]] = true
	}
	if len(lines) != pods || len(nodes) != 10 {
		t.Errorf("%d pods on %d nodes, want %d on all 10", len(lines), len(nodes), pods)
	}
	t.Logf("%d pods running on %d nodes with claim %s", len(lines), len(nodes), claim)

	// The group is gone: the claim is released and deleted with it.
	s.MustKubectl(t, "", "delete", "podgroup", "wide", "--wait=false")
	s.MustKubectl(t, "", "delete", "pods", "-l", "group=wide", "--grace-period=1", "--wait=false")
	s.MustKubectl(t, "", "wait", "--for=delete", "resourceclaim/"+claim, "--timeout=120s")
}

// TestGroupClaimBasic: a basic PodGroup names an existing claim; its pods,
// placed one by one, share it through one reservation for the group,
// next to a pod outside the group that is reserved on its own. When the
// group and its pods are gone, the claim stays (nobody generated it) and
// stays allocated for the other pod.
func TestGroupClaimBasic(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=3", "--simulate-devices-per-node=1", gangGates)
	s.MustKubectl(t, groupClaimSetup, "apply", "-f", "-")
	var b strings.Builder
	b.WriteString(`apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: fabric
spec:
  devices:
    requests:
    - name: fabric
      exactly:
        deviceClassName: fabric.sim.draplane.dev
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: serve
spec:
  schedulingPolicy:
    basic: {}
  resourceClaims:
  - name: fabric
    resourceClaimName: fabric
`)
	pod := func(name, group string) {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  labels:\n    group: %s\nspec:\n", name, group)
		if group != "none" {
			fmt.Fprintf(&b, "  schedulingGroup:\n    podGroupName: %s\n", group)
		}
		b.WriteString("  resourceClaims:\n  - name: fabric\n    resourceClaimName: fabric\n  containers:\n  - name: main\n    image: busybox\n")
	}
	for i := 0; i < 5; i++ {
		pod(fmt.Sprintf("serve-%d", i), "serve")
	}
	pod("solo", "none")
	s.MustKubectl(t, b.String(), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group in (serve,none)", "--timeout=120s")

	reservedFor := func() []string {
		return strings.Fields(s.MustKubectl(t, "", "get", "resourceclaim", "fabric", "-o", `jsonpath={range .status.reservedFor[*]}{.resource}/{.name}{"\n"}{end}`))
	}
	got := reservedFor()
	if strings.Join(got, ",") != "podgroups/serve,pods/solo" && strings.Join(got, ",") != "pods/solo,podgroups/serve" {
		t.Errorf("reservedFor %v, want the PodGroup serve and the pod solo", got)
	}

	s.MustKubectl(t, "", "delete", "podgroup", "serve", "--wait=false")
	s.MustKubectl(t, "", "delete", "pods", "-l", "group=serve", "--grace-period=1")
	s.MustKubectl(t, "", "wait", "--for=jsonpath={.status.reservedFor[0].name}=solo", "resourceclaim/fabric", "--timeout=120s")
	if got := reservedFor(); len(got) != 1 {
		t.Errorf("reservedFor %v after the group is gone, want pods/solo alone", got)
	}
	if device := s.MustKubectl(t, "", "get", "resourceclaim", "fabric", "-o", `jsonpath={.status.allocation.devices.results[*].device}`); device != "fabric-0" {
		t.Errorf("claim allocated %q, want fabric-0 (still used by solo)", device)
	}
}

// fabricPod is a pod outside any group with a claim of its own on the
// network-attached device: it runs only when nobody else holds fabric-0.
const fabricPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  resourceClaims:
  - name: fabric
    resourceClaimTemplateName: fabric
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: fabric
`

// TestGroupClaimOutlivesGroup: a PodGroup's claim belongs to the group's
// pods, not to the PodGroup object. Deleted under running pods, the group
// leaves their device allocated to them, so a pod outside the group that
// wants the same device waits until the last member is gone; then the
// claim goes and that pod runs. A group that stays while all its pods go
// releases its device (the claim is deallocated, not deleted) and gets it
// allocated again when a member comes back.
func TestGroupClaimOutlivesGroup(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=1", gangGates)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(launcher.Tail(s.Output(), 60))
		}
	})
	s.MustKubectl(t, groupClaimSetup, "apply", "-f", "-")
	groupClaim := func(group string) string {
		for _, name := range strings.Fields(s.MustKubectl(t, "", "get", "resourceclaims", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`)) {
			if strings.HasPrefix(name, group+"-fabric-") {
				return name
			}
		}
		t.Fatalf("no claim of PodGroup %s\n%s", group, dumpState(t, s, "default"))
		return ""
	}
	claimState := func(claim string) string {
		return s.MustKubectl(t, "", "get", "resourceclaim", claim, "-o", `jsonpath={.status.allocation.devices.results[*].device}/{range .status.reservedFor[*]}{.resource}:{.name} {end}`)
	}
	// stillPending checks for a while that the pod does not run.
	stillPending := func(pod string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if phase := s.MustKubectl(t, "", "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}/{.status.phase}"); phase != "/Pending" {
				t.Fatalf("pod %s is %s while fabric-0 is still in use by a PodGroup's pods\n%s", pod, phase, dumpState(t, s, "default"))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// 1. The group is deleted while its pods run.
	s.MustKubectl(t, groupClaimYAML("g", 2, 2), "create", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=g", "--timeout=120s")
	claim := groupClaim("g")
	s.MustKubectl(t, "", "delete", "podgroup", "g")
	s.MustKubectl(t, fmt.Sprintf(fabricPod, "thief"), "create", "-f", "-")
	stillPending("thief")
	if got := claimState(claim); got != "fabric-0/podgroups:g " {
		t.Errorf("claim %s after its PodGroup was deleted under running pods: %q, want fabric-0 reserved for podgroups:g", claim, got)
	}
	s.MustKubectl(t, "", "delete", "pod", "g-0", "--grace-period=1")
	stillPending("thief")
	s.MustKubectl(t, "", "delete", "pod", "g-1", "--grace-period=1")
	s.MustKubectl(t, "", "wait", "--for=delete", "resourceclaim/"+claim, "--timeout=120s")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/thief", "--timeout=120s")
	s.MustKubectl(t, "", "delete", "pod", "thief", "--grace-period=1")

	// 2. The group stays while all its pods go.
	s.MustKubectl(t, groupClaimYAML("h", 2, 2), "create", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=h", "--timeout=120s")
	claim = groupClaim("h")
	s.MustKubectl(t, "", "delete", "pods", "-l", "group=h", "--grace-period=1")
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return claimState(claim) == "/", nil
	})
	if err != nil {
		t.Fatalf("claim %s of PodGroup h after all its pods are gone: %q, want deallocated and reserved for nobody\n%s", claim, claimState(claim), dumpState(t, s, "default"))
	}
	s.MustKubectl(t, fmt.Sprintf(fabricPod, "borrower"), "create", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/borrower", "--timeout=120s")
	s.MustKubectl(t, "", "delete", "pod", "borrower", "--grace-period=1")
	// The members come back: the group's claim, still the same object,
	// is allocated again.
	s.MustKubectl(t, groupClaimYAML("h", 2, 2), "apply", "-f", "-")
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod", "-l", "group=h", "--timeout=120s")
	if got := claimState(claim); got != "fabric-0/podgroups:h " {
		t.Errorf("claim %s after the members came back: %q, want fabric-0 reserved for podgroups:h", claim, got)
	}
}
