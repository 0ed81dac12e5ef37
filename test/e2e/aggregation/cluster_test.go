package aggregation

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/launcher"
)

// The cluster of TestClusterScheduling: a real kube-apiserver,
// kube-controller-manager (resource claims from templates, disruption
// budgets) and kube-scheduler, draplane aggregated with
// --schedule-host-pods as deploy/cluster-scheduler installs it, and two
// nodes, each played by `dra-apiserver node-agent` with the upstream test
// driver's kubelet plugin (k8s.io/dynamic-resource-allocation) publishing
// four devices.
const (
	clusterDriver     = "upstream.example.com"
	clusterGates      = "GenericWorkload=true,DRAWorkloadResourceClaims=true,TopologyAwareWorkloadScheduling=true"
	draplaneScheduler = "draplane"
	ownerTaintKey     = "resource.draplane.dev/scheduler"
	// extendedGPU is the extended resource that DeviceClass
	// gpu-extended backs.
	extendedGPU = "example.com/gpu"
)

var clusterNodes = []string{"node-1", "node-2"}

// clusterAllocatable is what each node reports it has.
var clusterAllocatable = map[string]string{"node-1": "cpu=2,memory=8Gi,pods=110", "node-2": "cpu=8,memory=8Gi,pods=110"}

// clusterEnv is the running cluster.
type clusterEnv struct {
	*env
	plugins map[string]*launcher.Process
	agents  map[string]*launcher.Process
	// procs are the control plane's processes by name.
	procs map[string]*launcher.Process
}

// TestClusterScheduling: draplane places the host cluster's own pods that
// name it in spec.schedulerName, with the host's resource.k8s.io claims,
// and the host's kube-controller-manager, node agents and a real kubelet
// plugin take it from there, beside kube-scheduler.
func TestClusterScheduling(t *testing.T) {
	if os.Getenv("DRAPLANE_AGGREGATION") != "1" {
		t.Skip("set DRAPLANE_AGGREGATION=1 (make test-aggregated): builds and runs a real kube-apiserver, kube-controller-manager, kube-scheduler and etcd")
	}
	c := setUpCluster(t, true)
	t.Run("a pod with a template claim", c.testTemplateClaim)
	t.Run("extended resources", c.testExtendedResources)
	t.Run("devices on one node, cpu on the other", c.testDevicesButNotCPU)
	t.Run("room freed by kube-scheduler's pod", c.testRoomFreed)
	t.Run("gangs", c.testGangs)
	t.Run("a gang with a group claim and a topology constraint", c.testGroupClaimTopology)
	t.Run("preemption through the Eviction API", c.testPreemption)
	t.Run("binding conditions", c.testBindingConditions)
	t.Run("beside kube-scheduler", c.testBesideKubeScheduler)
	// Last: it reads what the server did in all of the above.
	t.Run("rbac", c.testRBAC)
}

// setUpCluster starts the cluster; withNodes adds the two nodes (agents
// and plugins).
func setUpCluster(t *testing.T, withNodes bool) *clusterEnv {
	e := &env{dir: t.TempDir()}
	var err error
	if e.kubectlPath, err = exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	c := &clusterEnv{env: e, plugins: map[string]*launcher.Process{}, agents: map[string]*launcher.Process{}, procs: map[string]*launcher.Process{}}
	toolsDir := buildTools(t, e)
	draBinary := buildServer(t, e)

	e.startHost(t, toolsDir,
		// No service account controller; and no node lifecycle
		// controller takes the not-ready taint off the nodes.
		append(e.auditArgs(t), "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
			"--feature-gates="+clusterGates, "--runtime-config=scheduling.k8s.io/v1beta1=true")...)
	kubeArgs := func() []string {
		return []string{"--kubeconfig=" + e.hostKubeconfig, "--authentication-kubeconfig=" + e.hostKubeconfig, "--authorization-kubeconfig=" + e.hostKubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", testenv.MustFreePort(t)),
			"--feature-gates=" + clusterGates, "--v=1",
			// Unthrottled, as draplane's clients below: the benchmark
			// compares what the code does, not client budgets.
			"--kube-api-qps=5000", "--kube-api-burst=5000"}
	}
	c.procs["kube-controller-manager"] = startProcessP(t, "kube-controller-manager", filepath.Join(toolsDir, "kube-controller-manager"),
		// Generated claims go with their pod through the garbage
		// collector; budgets need the disruption controller; a PodGroup
		// goes once the protection controller lets it.
		append(kubeArgs(), "--controllers=resourceclaim-controller,garbage-collector-controller,disruption-controller,podgroup-protection-controller",
			"--cert-dir="+filepath.Join(e.dir, "kcm-certs"))...)
	c.procs["kube-scheduler"] = startProcessP(t, "kube-scheduler", filepath.Join(toolsDir, "kube-scheduler"), kubeArgs()...)
	if withNodes {
		c.startNodes(t, draBinary)
	}

	// draplane, as deploy/cluster-scheduler installs it.
	serverKubeconfig := e.applyDeploy(t, "cluster-scheduler")
	e.replicaArgs = []string{
		"--mode=aggregated", "--kubeconfig=" + serverKubeconfig,
		"--bind-address=127.0.0.1",
		"--service-name=draplane", "--service-namespace=draplane-system",
		"--leader-elect-resource-namespace=draplane-system", "--leader-elect-retry-period=500ms",
		"--shared-ca-secret=draplane-ca",
		"--schedule-host-pods", "--scheduler-name=" + draplaneScheduler,
		"--controller-client-qps=5000", "--controller-client-burst=5000", "--device-map",
		"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,DRAWorkloadResourceClaims=true",
		"--v=2",
	}
	e.draDataDir = filepath.Join(e.dir, "draplane")
	c.procs["dra-apiserver"] = startProcessP(t, "dra-apiserver", draBinary,
		append([]string{"--data-dir=" + e.draDataDir, fmt.Sprintf("--secure-port=%d", e.draPort)}, e.replicaArgs...)...)
	exited := c.procs["dra-apiserver"].Exited()
	e.draCA = x509.NewCertPool()
	e.draCA.AppendCertsFromPEM(waitForFile(t, filepath.Join(e.draDataDir, "pki", "ca.crt"), exited))
	poll(t, "APIService v1."+group+" Available", func() (bool, error) {
		if err := exitedErr(exited); err != nil {
			return false, err
		}
		out, err := e.kubectl("get", "apiservice", "v1."+group, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return err == nil && out == "True", nil
	})

	// A class of the plugin's devices, templates of one to four of them,
	// the two pools draplane's (the owner taint), and priority classes.
	var objects strings.Builder
	fmt.Fprintf(&objects, `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu
spec:
  selectors:
  - cel:
      expression: device.driver == %q
`, clusterDriver)
	// The same devices as example.com/gpu, for containers that ask
	// for an extended resource.
	fmt.Fprintf(&objects, `---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu-extended
spec:
  extendedResourceName: %s
  selectors:
  - cel:
      expression: device.driver == %q
`, extendedGPU, clusterDriver)
	for n := 1; n <= 4; n++ {
		fmt.Fprintf(&objects, `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: gpus-%d
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu
          count: %d
`, n, n)
	}
	for _, node := range clusterNodes {
		objects.WriteString(ownerRule(node))
	}
	objects.WriteString(`---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: low
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000
`)
	if out, err := e.kubectlStdin(objects.String(), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the cluster's objects: %v\n%s", err, out)
	}
	return c
}

// startNodes starts the nodes: an agent each, then the plugin.
func (c *clusterEnv) startNodes(t *testing.T, draBinary string) {
	// The agent first, then the plugin (its slice controller
	// makes the Node the owner of its slices, so the Node must exist).
	// Unix socket paths are short: not under the test's directory.
	driverBinary := filepath.Join(c.dir, "upstreamdriver")
	build := exec.Command("go", "build", "-o", driverBinary, ".")
	build.Dir = filepath.Join(testenv.RepoRoot(), "test", "e2e", "upstreamdriver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/e2e/upstreamdriver: %v\n%s", err, out)
	}
	sockets, err := os.MkdirTemp("", "dpc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	for i, node := range clusterNodes {
		registrar := filepath.Join(sockets, fmt.Sprintf("r%d", i))
		agent := &launcher.Process{Name: "node-agent-" + node, Binary: draBinary,
			Args: []string{"node-agent", "--kubeconfig", c.hostKubeconfig, "--node-name", node, "--resource-api=resource.k8s.io",
				"--allocatable=" + clusterAllocatable[node], "--plugin-registration-dir", registrar,
				// As the host's kubelets would: claims reserved for a
				// pod's PodGroup are the pod's.
				"--feature-gates=GenericWorkload=true,DRAWorkloadResourceClaims=true",
				"--checkpoint", filepath.Join(c.dir, node+"-checkpoint.json"), "-v", "2"},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		c.agents[node] = agent
		t.Cleanup(func() {
			agent.Stop()
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", agent.Name, launcher.Tail(agent.Output(), 40))
			}
		})
		poll(t, node+" registered Ready", func() (bool, error) {
			out, _ := c.kubectl("get", "node", node, "--ignore-not-found", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return out == "True", nil
		})
		plugin := &launcher.Process{Name: "plugin-" + node, Binary: driverBinary,
			Args: []string{"--kubeconfig", c.hostKubeconfig, "--node-name", node, "--driver-name", clusterDriver, "--devices", "4",
				"--registrar-dir", registrar, "--plugin-dir", filepath.Join(sockets, fmt.Sprintf("p%d", i)), "-v", "2"},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
		if err := plugin.Start(); err != nil {
			t.Fatal(err)
		}
		c.plugins[node] = plugin
		t.Cleanup(func() {
			plugin.Stop()
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", plugin.Name, launcher.Tail(plugin.Output(), 40))
			}
		})
	}
	poll(t, "the plugins' slices", func() (bool, error) {
		out, err := c.kubectl("get", "resourceslices.resource.k8s.io", "-o", "name")
		return err == nil && len(strings.Fields(out)) == len(clusterNodes), nil
	})

}

// ownerRule is the DeviceTaintRule that makes the node's pool draplane's.
func ownerRule(node string) string {
	return fmt.Sprintf(`---
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: draplane-owns-%s
spec:
  deviceSelector:
    driver: %s
    pool: %s
  taint:
    key: %s
    value: draplane
    effect: NoSchedule
`, node, clusterDriver, node, ownerTaintKey)
}

// clusterPod is a pod with one claim from the gpus-<devices> template.
// Options: "scheduler=<name>", "cpu=<quantity>", "node=<name>" (node
// selector), "priority=<class>", "group=<PodGroup>", "label=<k>=<v>",
// "shared=<template>" (a second claim, "shared": its PodGroup's claim
// when the group has one of that name and template).
func clusterPod(name string, devices int, options ...string) string {
	scheduler, cpu, extra, labels, sharedClaim, sharedUse := draplaneScheduler, "100m", "", "", "", ""
	for _, option := range options {
		key, value, _ := strings.Cut(option, "=")
		switch key {
		case "scheduler":
			scheduler = value
		case "cpu":
			cpu = value
		case "node":
			extra += fmt.Sprintf("  nodeSelector:\n    kubernetes.io/hostname: %s\n", value)
		case "priority":
			extra += fmt.Sprintf("  priorityClassName: %s\n", value)
		case "group":
			extra += fmt.Sprintf("  schedulingGroup:\n    podGroupName: %s\n", value)
			labels += fmt.Sprintf("    group: %s\n", value)
		case "label":
			k, v, _ := strings.Cut(value, "=")
			labels += fmt.Sprintf("    %s: %s\n", k, v)
		case "shared":
			sharedClaim = fmt.Sprintf("  - name: shared\n    resourceClaimTemplateName: %s\n", value)
			sharedUse = "      - name: shared\n"
		}
	}
	if labels != "" {
		labels = "  labels:\n" + labels
	}
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
%sspec:
  schedulerName: %s
%s  resourceClaims:
  - name: gpus
    resourceClaimTemplateName: gpus-%d
%s  containers:
  - name: main
    image: busybox
    resources:
      requests:
        cpu: %s
      claims:
      - name: gpus
%s`, name, labels, scheduler, extra, devices, sharedClaim, cpu, sharedUse)
}

// get reads one jsonpath of an object of the host, "" when it is gone.
func (c *clusterEnv) get(t *testing.T, object, jsonpath string) string {
	t.Helper()
	out, err := c.kubectl("get", object, "-n", "default", "--ignore-not-found", "-o", "jsonpath="+jsonpath)
	if err != nil {
		t.Fatalf("kubectl get %s: %v\n%s", object, err, out)
	}
	return out
}

func (c *clusterEnv) mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := c.kubectlStdin(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// waitFor polls the jsonpath of an object until it has the value.
func (c *clusterEnv) waitFor(t *testing.T, object, jsonpath, want string) {
	t.Helper()
	poll(t, object+" "+jsonpath+"="+want, func() (bool, error) {
		return c.get(t, object, jsonpath) == want, nil
	}, c.env)
}

// waitGone waits until the object is gone.
func (c *clusterEnv) waitGone(t *testing.T, objects ...string) {
	t.Helper()
	for _, object := range objects {
		poll(t, object+" gone", func() (bool, error) {
			out, err := c.kubectl("get", object, "-n", "default", "--ignore-not-found", "-o", "name")
			return err == nil && out == "", nil
		}, c.env)
	}
}

// calls counts the plugin's PREPARE or UNPREPARE calls that name claim,
// over both nodes.
func (c *clusterEnv) calls(kind, claim string) int {
	n := 0
	for _, plugin := range c.plugins {
		for line := range strings.SplitSeq(plugin.Output(), "\n") {
			if rest, ok := strings.CutPrefix(line, kind+" claims="); ok && strings.Contains(","+rest+",", ",default/"+claim+",") {
				n++
			}
		}
	}
	return n
}

// claimOf is the claim of a pod's "gpus" pod claim.
func (c *clusterEnv) claimOf(t *testing.T, pod string) string {
	t.Helper()
	var claim string
	poll(t, "the claim of pod "+pod, func() (bool, error) {
		claim = c.get(t, "pod/"+pod, `{.status.resourceClaimStatuses[?(@.name=="gpus")].resourceClaimName}`)
		return claim != "", nil
	}, c.env)
	return claim
}

// noDeviceTwice fails when a device is in two allocated claims.
func (c *clusterEnv) noDeviceTwice(t *testing.T) int {
	t.Helper()
	out := c.mustKubectl(t, "", "get", "resourceclaims.resource.k8s.io", "-A", "-o", "json")
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name string }
			Status   struct {
				Allocation *struct {
					Devices struct {
						Results []struct{ Driver, Pool, Device string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	allocated := 0
	for _, claim := range list.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			name := claim.Metadata.Namespace + "/" + claim.Metadata.Name
			if other, ok := holders[id]; ok {
				t.Errorf("device %s is allocated to claims %s and %s", id, other, name)
			}
			holders[id] = name
			allocated++
		}
	}
	return allocated
}

// testTemplateClaim: a pod with schedulerName draplane and a template
// claim is bound by draplane; its host claim, which the host's
// kube-controller-manager generated, is allocated and reserved as
// kube-scheduler would write it (upstream's finalizer, a node selector);
// the plugin prepares it once and the pod runs; resourcepools through the
// aggregated API counts the device; on deletion it is unprepared once and
// the claim goes.
func (c *clusterEnv) testTemplateClaim(t *testing.T) {
	c.mustKubectl(t, clusterPod("one", 1), "apply", "-f", "-")
	c.waitFor(t, "pod/one", "{.status.phase}", "Running")
	claim := c.claimOf(t, "one")
	node := c.get(t, "pod/one", "{.spec.nodeName}")
	if got := c.get(t, "resourceclaim.resource.k8s.io/"+claim, "{.status.reservedFor[*].name}"); got != "one" {
		t.Errorf("claim %s reserved for %q, want the pod", claim, got)
	}
	if got := c.get(t, "resourceclaim.resource.k8s.io/"+claim, "{.status.allocation.devices.results[*].pool}"); got != node {
		t.Errorf("claim %s allocated from pool %q, the pod is on %q", claim, got, node)
	}
	if got := c.get(t, "resourceclaim.resource.k8s.io/"+claim, "{.status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]}"); got != node {
		t.Errorf("claim %s: allocation.nodeSelector names %q, want %q", claim, got, node)
	}
	if got := c.get(t, "resourceclaim.resource.k8s.io/"+claim, "{.metadata.finalizers}"); !strings.Contains(got, "resource.kubernetes.io/delete-protection") {
		t.Errorf("claim %s finalizers %s, want upstream's delete protection", claim, got)
	}
	if got := c.mustKubectl(t, "", "get", "events", "-n", "default", "--field-selector", "involvedObject.name=one,reason=Scheduled", "-o", "jsonpath={.items[*].message}"); !strings.Contains(got, "Successfully assigned default/one to "+node) {
		t.Errorf("Scheduled event %q", got)
	}
	if n := c.calls("PREPARE", claim); n != 1 {
		t.Errorf("%d NodePrepareResources calls with claim %s, want 1", n, claim)
	}
	pools := c.mustKubectl(t, "", "get", "resourcepools."+group, "-o", `jsonpath={range .items[*]}{.status.pool}={.status.devices.allocated}/{.status.devices.total}/{.status.devices.tainted}{"\n"}{end}`)
	if !strings.Contains(pools, node+"=1/4/0") {
		t.Errorf("resourcepools through the aggregated API:\n%s\nwant %s with 1 of 4 devices allocated, none tainted (the owner mark is none)", pools, node)
	}
	c.checkDeviceMap(t, node, claim)

	c.mustKubectl(t, "", "delete", "pod", "one", "-n", "default", "--timeout=2m")
	c.waitGone(t, "resourceclaim.resource.k8s.io/"+claim)
	if n := c.calls("UNPREPARE", claim); n != 1 {
		t.Errorf("%d NodeUnprepareResources calls with claim %s, want 1", n, claim)
	}
}

// extendedPod is a pod of draplane's without claims whose container asks
// for count of the extended resource.
func extendedPod(name, resource string, count int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  schedulerName: %s
  containers:
  - name: main
    image: busybox
    resources:
      requests:
        cpu: 100m
        %s: %d
      limits:
        %s: %d
`, name, draplaneScheduler, resource, count, resource, count)
}

// testExtendedResources: a pod that asks for two example.com/gpu, which
// a DeviceClass backs, gets a claim for them, made as kube-scheduler
// makes it (owned by the pod, recorded in
// status.extendedResourceClaimStatus), allocated with two devices of its
// node and reserved for it; the plugin prepares it once, the pod runs;
// when it is deleted, the claim is unprepared once and goes with it. A
// pod that asks for an extended resource no class backs and no node has
// (a device plugin's) stays Pending, and the explanation names it.
func (c *clusterEnv) testExtendedResources(t *testing.T) {
	c.mustKubectl(t, extendedPod("ext", extendedGPU, 2)+"---\n"+extendedPod("plugin-only", "example.com/fpga", 1), "apply", "-f", "-")
	c.waitFor(t, "pod/ext", "{.status.phase}", "Running")
	claim := c.get(t, "pod/ext", "{.status.extendedResourceClaimStatus.resourceClaimName}")
	if !strings.HasPrefix(claim, "ext-extended-resources-") {
		t.Fatalf("pod/ext status.extendedResourceClaimStatus names claim %q", claim)
	}
	if got := c.get(t, "pod/ext", "{.status.extendedResourceClaimStatus.requestMappings[0].resourceName}"); got != extendedGPU {
		t.Errorf("pod/ext request mapping for %q, want %s", got, extendedGPU)
	}
	node := c.get(t, "pod/ext", "{.spec.nodeName}")
	object := "resourceclaim.resource.k8s.io/" + claim
	if got := c.get(t, object, "{.metadata.ownerReferences[0].name}/{.metadata.annotations.resource\\.kubernetes\\.io/extended-resource-claim}"); got != "ext/true" {
		t.Errorf("claim %s owner/annotation %q, want ext/true", claim, got)
	}
	if got := c.get(t, object, "{.status.allocation.devices.results[*].pool}"); got != node+" "+node {
		t.Errorf("claim %s allocated from pools %q, want two devices of %s", claim, got, node)
	}
	if got := c.get(t, object, "{.status.reservedFor[*].name}"); got != "ext" {
		t.Errorf("claim %s reserved for %q, want the pod", claim, got)
	}
	if n := c.calls("PREPARE", claim); n != 1 {
		t.Errorf("%d NodePrepareResources calls with claim %s, want 1", n, claim)
	}
	var message string
	poll(t, "pod/plugin-only PodScheduled=False", func() (bool, error) {
		message = c.get(t, "pod/plugin-only", `{.status.conditions[?(@.type=="PodScheduled")].message}`)
		return message != "", nil
	}, c.env)
	if !strings.Contains(message, "2 Insufficient example.com/fpga") {
		t.Errorf("pod/plugin-only PodScheduled=False message %q, want both nodes lacking example.com/fpga", message)
	}
	c.mustKubectl(t, "", "delete", "pod", "ext", "plugin-only", "-n", "default", "--timeout=2m")
	c.waitGone(t, object)
	if n := c.calls("UNPREPARE", claim); n != 1 {
		t.Errorf("%d NodeUnprepareResources calls with claim %s, want 1", n, claim)
	}
}

// checkDeviceMap reads the device map's first snapshot from draplane's
// port (as the host's admin, through the front proxy's identity): the
// node's four devices, owned (not tainted), one held by the claim of pod
// one.
func (c *clusterEnv) checkDeviceMap(t *testing.T, node, claim string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.draURL("/devicemap/events"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := c.draClient(&c.frontProxyCert).Do(req)
	if err != nil {
		t.Fatalf("device map: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("device map: %s: %s", resp.Status, body)
	}
	var snapshot struct {
		Nodes []struct {
			Node    string
			Devices []struct {
				ID, State string
				Owned     bool
				Taints    []string
				Claims    []struct {
					Name string
					Pods []string
				}
			}
		}
	}
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		if data, ok := strings.CutPrefix(scanner.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &snapshot); err != nil {
				t.Fatalf("device map snapshot: %v", err)
			}
			break
		}
	}
	var seen []string
	for _, row := range snapshot.Nodes {
		if row.Node != node {
			continue
		}
		for _, d := range row.Devices {
			seen = append(seen, fmt.Sprintf("%s:%s:owned=%v:taints=%v:%v", d.ID, d.State, d.Owned, d.Taints, d.Claims))
			if !strings.HasPrefix(d.ID, clusterDriver+"/"+node+"/") || !d.Owned || len(d.Taints) > 0 {
				t.Errorf("device map: device %s of %s: owned=%v taints=%v, want an owned device without taints", d.ID, node, d.Owned, d.Taints)
			}
		}
	}
	held := slices.ContainsFunc(seen, func(s string) bool {
		return strings.Contains(s, ":allocated:") && strings.Contains(s, "default/"+claim+" [default/one]")
	})
	if len(seen) != 4 || !held {
		t.Errorf("device map of %s: %q, want 4 devices, one allocated to claim %s of pod one", node, seen, claim)
	}
}

// plainPod is a pod without claims that asks for cpu on a node.
func plainPod(name, scheduler, node, cpu string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  schedulerName: %s
  nodeSelector:
    kubernetes.io/hostname: %s
  containers:
  - name: main
    image: busybox
    resources:
      requests:
        cpu: %s
`, name, scheduler, node, cpu)
}

// testRoomFreed: a pod of draplane's without claims waits for cpu on
// node-1 (2 cpus) that a pod of kube-scheduler's holds; once that pod is
// deleted, draplane places its pod there without another change in the
// cluster.
func (c *clusterEnv) testRoomFreed(t *testing.T) {
	c.mustKubectl(t, plainPod("theirs", "default-scheduler", "node-1", "1500m"), "apply", "-f", "-")
	c.waitFor(t, "pod/theirs", "{.status.phase}", "Running")
	c.mustKubectl(t, plainPod("ours", draplaneScheduler, "node-1", "1"), "apply", "-f", "-")
	var message string
	poll(t, "pod/ours PodScheduled=False", func() (bool, error) {
		message = c.get(t, "pod/ours", `{.status.conditions[?(@.type=="PodScheduled")].message}`)
		return message != "", nil
	}, c.env)
	if !strings.Contains(message, "Insufficient cpu") {
		t.Errorf("pod/ours PodScheduled=False message %q, want Insufficient cpu", message)
	}
	c.mustKubectl(t, "", "delete", "pod", "theirs", "-n", "default", "--timeout=2m")
	c.waitFor(t, "pod/ours", "{.spec.nodeName}", "node-1")
	c.mustKubectl(t, "", "delete", "pod", "ours", "-n", "default", "--timeout=2m")
}

// testDevicesButNotCPU: node-2's devices are all in use, node-1 has free
// devices but not the cpu the pod asks for (2 cpus, 3 asked; node-2 has
// 8): the pod stays Pending, and the explanation names both.
func (c *clusterEnv) testDevicesButNotCPU(t *testing.T) {
	c.mustKubectl(t, clusterPod("filler", 4, "node=node-2"), "apply", "-f", "-")
	c.waitFor(t, "pod/filler", "{.status.phase}", "Running")
	c.mustKubectl(t, clusterPod("hungry", 1, "cpu=3"), "apply", "-f", "-")
	var message string
	poll(t, "pod/hungry PodScheduled=False", func() (bool, error) {
		message = c.get(t, "pod/hungry", `{.status.conditions[?(@.type=="PodScheduled")].message}`)
		return message != "", nil
	}, c.env)
	if !strings.Contains(message, "Insufficient cpu") || !strings.Contains(message, "node-2") {
		t.Errorf("pod/hungry PodScheduled=False message %q, want the cpu node-1 lacks and the devices node-2 lacks", message)
	}
	if got := c.get(t, "pod/hungry", "{.spec.nodeName}"); got != "" {
		t.Errorf("pod/hungry bound to %s", got)
	}
	if got := c.mustKubectl(t, "", "get", "events", "-n", "default", "--field-selector", "involvedObject.name=hungry,reason=FailedScheduling", "-o", "name"); got == "" {
		t.Error("no FailedScheduling event on pod/hungry")
	}
	t.Logf("explanation: %s", message)
	c.mustKubectl(t, "", "delete", "pod", "filler", "hungry", "-n", "default", "--timeout=2m")
}

// testGangs: a PodGroup of four members with two devices each takes all
// eight devices of the two nodes, placed whole; a second gang that cannot
// fit then holds nothing.
func (c *clusterEnv) testGangs(t *testing.T) {
	group := func(name string, members int) string {
		var b strings.Builder
		fmt.Fprintf(&b, `apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: %s
  namespace: default
spec:
  schedulingPolicy:
    gang:
      minCount: %d
`, name, members)
		for i := range members {
			b.WriteString(clusterPod(fmt.Sprintf("%s-%d", name, i), 2, "group="+name))
		}
		return b.String()
	}
	c.mustKubectl(t, group("train", 4), "apply", "-f", "-")
	for i := range 4 {
		c.waitFor(t, fmt.Sprintf("pod/train-%d", i), "{.status.phase}", "Running")
	}
	if n := c.noDeviceTwice(t); n != 8 {
		t.Errorf("%d devices allocated after the gang, want all 8", n)
	}
	c.mustKubectl(t, group("late", 2), "apply", "-f", "-")
	poll(t, "gang late reported unschedulable", func() (bool, error) {
		return c.get(t, "pod/late-0", `{.status.conditions[?(@.type=="PodScheduled")].status}`) == "False", nil
	}, c.env)
	for i := range 2 {
		pod := fmt.Sprintf("late-%d", i)
		claim := c.claimOf(t, pod)
		if got := c.get(t, "resourceclaim.resource.k8s.io/"+claim, "{.status.allocation}"); got != "" {
			t.Errorf("claim %s of %s is allocated while its gang cannot fit: %s", claim, pod, got)
		}
		if got := c.get(t, "pod/"+pod, "{.spec.nodeName}"); got != "" {
			t.Errorf("pod %s of a gang that cannot fit is bound to %s", pod, got)
		}
	}
	c.mustKubectl(t, "", "delete", "pods", "-n", "default", "-l", "group in (train,late)", "--timeout=2m")
	c.mustKubectl(t, "", "delete", "podgroups", "-n", "default", "train", "late", "--wait=false")
	poll(t, "every claim gone", func() (bool, error) {
		out, err := c.kubectl("get", "resourceclaims.resource.k8s.io", "-A", "-o", "name")
		return err == nil && out == "", nil
	}, c.env)
}

// testGroupClaimTopology: node-1 (rack-a) has one free device, node-2
// (rack-b) four. A PodGroup of three members that must share a rack,
// each with a device of its own and all with the group's claim of one
// device (generated by the host's kube-controller-manager), needs four
// devices in one rack: it is placed whole on node-2. The group's claim is
// reserved for the PodGroup, prepared once on the node, and goes with the
// group.
func (c *clusterEnv) testGroupClaimTopology(t *testing.T) {
	for i, node := range clusterNodes {
		c.mustKubectl(t, "", "label", "node", node, "--overwrite", fmt.Sprintf("rack=rack-%c", 'a'+i))
	}
	c.mustKubectl(t, clusterPod("filler", 3, "node=node-1"), "apply", "-f", "-")
	c.waitFor(t, "pod/filler", "{.status.phase}", "Running")
	var b strings.Builder
	b.WriteString(`apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: ring
  namespace: default
spec:
  schedulingPolicy:
    gang:
      minCount: 3
  schedulingConstraints:
    topology:
    - key: rack
  resourceClaims:
  - name: shared
    resourceClaimTemplateName: gpus-1
`)
	for i := range 3 {
		b.WriteString(clusterPod(fmt.Sprintf("ring-%d", i), 1, "group=ring", "shared=gpus-1"))
	}
	c.mustKubectl(t, b.String(), "apply", "-f", "-")
	for i := range 3 {
		c.waitFor(t, fmt.Sprintf("pod/ring-%d", i), "{.status.phase}", "Running")
		if node := c.get(t, fmt.Sprintf("pod/ring-%d", i), "{.spec.nodeName}"); node != "node-2" {
			t.Errorf("ring-%d on %s, want node-2, the only rack with four free devices", i, node)
		}
	}
	shared := c.get(t, "podgroup/ring", `{.status.resourceClaimStatuses[?(@.name=="shared")].resourceClaimName}`)
	if shared == "" {
		t.Fatal("PodGroup ring records no claim for shared")
	}
	for i := range 3 {
		if got := c.get(t, fmt.Sprintf("pod/ring-%d", i), `{.status.resourceClaimStatuses[?(@.name=="shared")].resourceClaimName}`); got != shared {
			t.Errorf("ring-%d uses claim %q for shared, want the group's %s", i, got, shared)
		}
	}
	object := "resourceclaim.resource.k8s.io/" + shared
	if got := c.get(t, object, "{.status.reservedFor[*].resource}/{.status.reservedFor[*].name}"); got != "podgroups/ring" {
		t.Errorf("group claim %s reserved for %q, want podgroups/ring", shared, got)
	}
	if n := c.calls("PREPARE", shared); n != 1 {
		t.Errorf("%d NodePrepareResources calls with the group claim %s, want 1", n, shared)
	}
	if n := c.noDeviceTwice(t); n != 7 {
		t.Errorf("%d devices allocated, want 7 (3 filler, 3 members, 1 shared)", n)
	}
	c.mustKubectl(t, "", "delete", "pods", "-n", "default", "-l", "group=ring", "--timeout=2m")
	c.mustKubectl(t, "", "delete", "-n", "default", "podgroup/ring", "pod/filler", "--timeout=2m")
	if n := c.calls("UNPREPARE", shared); n != 1 {
		t.Errorf("%d NodeUnprepareResources calls with the group claim %s, want 1", n, shared)
	}
	poll(t, "every claim gone", func() (bool, error) {
		out, err := c.kubectl("get", "resourceclaims.resource.k8s.io", "-A", "-o", "name")
		return err == nil && out == "", nil
	}, c.env)
}

// testBindingConditions: a device of node-2 (draplane's, by the owner
// mark in its slice) has a binding condition. The pod's claim is
// allocated and reserved, but the pod is not bound while the condition is
// not True, and PodScheduled says what it waits for. Once the device's
// controller (here kubectl) reports it in the claim's device status, the
// pod is bound to node-2.
func (c *clusterEnv) testBindingConditions(t *testing.T) {
	const attach = "attach.example.com"
	objects := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: attachable
spec:
  selectors:
  - cel:
      expression: device.driver == %[1]q
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-2-attach
spec:
  driver: %[1]s
  nodeName: node-2
  pool:
    name: node-2
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: dev-0
    bindingConditions: ["example.com/attached"]
    bindingFailureConditions: ["example.com/attach-failed"]
    taints:
    - key: %[2]s
      value: draplane
      effect: NoSchedule
---
apiVersion: resource.k8s.io/v1
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
---
apiVersion: v1
kind: Pod
metadata:
  name: attach
  namespace: default
spec:
  schedulerName: %[3]s
  resourceClaims:
  - name: dev
    resourceClaimName: attach
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: dev
`, attach, ownerTaintKey, draplaneScheduler)
	c.mustKubectl(t, objects, "apply", "-f", "-")
	var message string
	poll(t, "pod/attach PodScheduled=False/BindingConditionsPending", func() (bool, error) {
		message = c.get(t, "pod/attach", `{.status.conditions[?(@.reason=="BindingConditionsPending")].message}`)
		return message != "", nil
	}, c.env)
	if !strings.Contains(message, "example.com/attached") || !strings.Contains(message, "node-2") {
		t.Errorf("PodScheduled message %q, want the condition and the node", message)
	}
	if got := c.get(t, "resourceclaim.resource.k8s.io/attach", "{.status.reservedFor[*].name}/{.status.allocation.devices.results[0].bindingConditions[0]}"); got != "attach/example.com/attached" {
		t.Errorf("claim attach reservedFor/bindingConditions %q, want the pod and the device's condition", got)
	}
	if got := c.get(t, "pod/attach", "{.spec.nodeName}"); got != "" {
		t.Fatalf("pod/attach bound to %s before its device's binding condition is True", got)
	}
	status := fmt.Sprintf(`{"status":{"devices":[{"driver":%q,"pool":"node-2","device":"dev-0","conditions":[{"type":"example.com/attached","status":"True","reason":"Attached","message":"","lastTransitionTime":%q}]}]}}`,
		attach, time.Now().UTC().Format(time.RFC3339))
	c.mustKubectl(t, "", "patch", "resourceclaim.resource.k8s.io", "attach", "-n", "default", "--subresource=status", "--type=merge", "-p", status)
	c.waitFor(t, "pod/attach", "{.spec.nodeName}", "node-2")
	c.mustKubectl(t, "", "delete", "-n", "default", "pod/attach", "resourceclaim.resource.k8s.io/attach", "--timeout=2m")
	c.mustKubectl(t, "", "delete", "resourceslice.resource.k8s.io/node-2-attach", "deviceclass.resource.k8s.io/attachable", "--timeout=2m")
}

// testPreemption: two low-priority pods hold all eight devices and a
// disruption budget forbids evicting either; a high-priority pod that
// needs one device preempts through the Eviction API, is refused and
// waits, nominated; once the budget is gone one victim is evicted and
// the pod runs.
func (c *clusterEnv) testPreemption(t *testing.T) {
	c.mustKubectl(t, clusterPod("victim-1", 4, "priority=low", "node=node-1", "label=app=victim")+clusterPod("victim-2", 4, "priority=low", "node=node-2", "label=app=victim"), "apply", "-f", "-")
	c.waitFor(t, "pod/victim-1", "{.status.phase}", "Running")
	c.waitFor(t, "pod/victim-2", "{.status.phase}", "Running")
	c.mustKubectl(t, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: victims
  namespace: default
spec:
  minAvailable: 2
  selector:
    matchLabels:
      app: victim
`, "apply", "-f", "-")
	c.mustKubectl(t, clusterPod("urgent", 1, "priority=high"), "apply", "-f", "-")
	poll(t, "a refused eviction", func() (bool, error) {
		out := c.mustKubectl(t, "", "get", "events", "-n", "default", "--field-selector", "involvedObject.name=urgent,reason=PreemptionFailed", "-o", "name")
		return out != "", nil
	}, c.env)
	if got := c.get(t, "pod/urgent", "{.status.nominatedNodeName}"); got == "" {
		t.Error("pod/urgent is not nominated while it waits for its victim")
	}
	for _, victim := range []string{"victim-1", "victim-2"} {
		if got := c.get(t, "pod/"+victim, "{.metadata.deletionTimestamp}"); got != "" {
			t.Errorf("%s is being deleted though the budget forbids it", victim)
		}
	}
	c.mustKubectl(t, "", "delete", "pdb", "victims", "-n", "default")
	c.waitFor(t, "pod/urgent", "{.status.phase}", "Running")
	left := 0
	for _, victim := range []string{"victim-1", "victim-2"} {
		if c.get(t, "pod/"+victim, "{.metadata.name}") != "" {
			left++
		}
	}
	if left != 1 {
		t.Errorf("%d victims left, want 1: one eviction frees the device", left)
	}
	c.noDeviceTwice(t)
	c.mustKubectl(t, "", "delete", "pods", "-n", "default", "--all", "--timeout=2m")
	poll(t, "every claim gone", func() (bool, error) {
		out, err := c.kubectl("get", "resourceclaims.resource.k8s.io", "-A", "-o", "name")
		return err == nil && out == "", nil
	}, c.env)
}

// testBesideKubeScheduler: node-1's devices are draplane's, node-2's
// kube-scheduler's (its owner rule is deleted). In each of 20 rounds one
// device is free and a pod of each scheduler asks for it at once: the
// owner's pod gets it, the other waits, and no device is ever in two
// claims. In the first ten rounds the free device is draplane's, in the
// last ten kube-scheduler's.
func (c *clusterEnv) testBesideKubeScheduler(t *testing.T) {
	c.mustKubectl(t, "", "delete", "devicetaintrule.resource.k8s.io", "draplane-owns-node-2")
	fill := func(draplaneDevices, kubeDevices int) {
		c.mustKubectl(t, clusterPod("fill-draplane", draplaneDevices, "node=node-1")+
			clusterPod("fill-kube", kubeDevices, "node=node-2", "scheduler=default-scheduler"), "apply", "-f", "-")
		c.waitFor(t, "pod/fill-draplane", "{.status.phase}", "Running")
		c.waitFor(t, "pod/fill-kube", "{.status.phase}", "Running")
	}
	fill(3, 4)
	for round := range 20 {
		if round == 10 {
			c.mustKubectl(t, "", "delete", "pod", "fill-draplane", "fill-kube", "-n", "default", "--timeout=2m")
			poll(t, "the fillers' claims gone", func() (bool, error) {
				out, err := c.kubectl("get", "resourceclaims.resource.k8s.io", "-A", "-o", "name")
				return err == nil && out == "", nil
			}, c.env)
			fill(4, 3)
		}
		winner, loser := "draplane", "kube"
		if round >= 10 {
			winner, loser = loser, winner
		}
		c.mustKubectl(t, clusterPod("race-draplane", 1)+clusterPod("race-kube", 1, "scheduler=default-scheduler"), "apply", "-f", "-")
		c.waitFor(t, "pod/race-"+winner, "{.status.phase}", "Running")
		// The loser had all the time the winner took: it stays.
		if got := c.get(t, "pod/race-"+loser, "{.spec.nodeName}"); got != "" {
			t.Errorf("round %d: race-%s was bound to %s too", round, loser, got)
		}
		if n := c.noDeviceTwice(t); n != 8 {
			t.Errorf("round %d: %d devices allocated, want 8", round, n)
		}
		loserClaim := c.claimOf(t, "race-"+loser)
		if got := c.get(t, "resourceclaim.resource.k8s.io/"+loserClaim, "{.status.allocation}"); got != "" {
			t.Errorf("round %d: the claim of race-%s is allocated: %s", round, loser, got)
		}
		winnerClaim := c.claimOf(t, "race-"+winner)
		c.mustKubectl(t, "", "delete", "pod", "race-draplane", "race-kube", "-n", "default", "--timeout=2m")
		c.waitGone(t, "resourceclaim.resource.k8s.io/"+winnerClaim, "resourceclaim.resource.k8s.io/"+loserClaim)
	}
	c.mustKubectl(t, "", "delete", "pods", "-n", "default", "--all", "--timeout=2m")
	if t.Failed() {
		return
	}
	t.Log("20 rounds, the owner's pod placed each time, no device in two claims")
}

// testRBAC: draplane did all of the above as deploy/cluster-scheduler's
// ServiceAccount: no request was refused, each is in the tables of uses,
// every verb draplane:scheduler grants is one of clusterSchedulerUses and
// was made (or says why not here), and each of its rules, taken away,
// denies some of them.
func (c *clusterEnv) testRBAC(t *testing.T) {
	seen := c.serverRequests(t, uses, clusterSchedulerUses)
	reportUses(t, clusterSchedulerUses, seen)
	var scheduler []grant
	for _, g := range c.serverGrantsOf(t, filepath.Join("deploy", "cluster-scheduler")) {
		if g.role != nil && g.role.Name == "draplane:scheduler" {
			scheduler = append(scheduler, g)
		}
	}
	if len(scheduler) == 0 {
		t.Fatal("deploy/cluster-scheduler grants the server no draplane:scheduler rule")
	}
	for _, g := range scheduler {
		rule := g.role.Rules[g.rule]
		for _, groupName := range rule.APIGroups {
			for _, resource := range rule.Resources {
				r, sub, _ := strings.Cut(resource, "/")
				for _, verb := range rule.Verbs {
					if !slices.ContainsFunc(clusterSchedulerUses, func(u use) bool {
						return u.verb == verb && u.group == groupName && u.resource == r && u.subresource == sub
					}) {
						t.Errorf("%s grants %s %s %s which the server never uses: remove it", g.what, verb, resource, groupName)
					}
				}
			}
		}
	}
	for _, u := range clusterSchedulerUses {
		if !c.allowed(t, u) {
			t.Errorf("deploy/cluster-scheduler does not allow %s (%s)", u, u.why)
		}
	}
	for _, g := range scheduler {
		t.Run("without "+g.what, func(t *testing.T) {
			var served []use
			for _, u := range clusterSchedulerUses {
				if covers(g.role.Rules[g.rule], u) {
					served = append(served, u)
				}
			}
			c.takeAway(t, g)
			var denied []string
			poll(t, "a use denied without "+g.what, func() (bool, error) {
				denied = nil
				for _, u := range served {
					if !c.allowed(t, u) {
						denied = append(denied, u.String())
					}
				}
				return len(denied) > 0, nil
			})
			t.Logf("denied without it: %s", strings.Join(denied, ", "))
		})
	}
}
