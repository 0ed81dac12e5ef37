package reliability

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
	"github.com/draplane/draplane/test/launcher"
)

const (
	chaosGangLabel  = "chaos.reliability.draplane.dev/gang"
	chaosRackLabel  = "example.com/rack"
	chaosSimNodes   = 6
	chaosSimDevices = 8
	chaosAgents     = 2
	// chaosReplicas dra-apiserver replicas share a 3-member etcd cluster:
	// agent i talks to replica i, the test's clients to the last one;
	// one of them, the lease holder, runs the controllers.
	chaosReplicas     = 3
	chaosEtcdMembers  = 3
	chaosAgentDevices = 4
	chaosPlugin       = "upstream.example.com"
	// chaosAgentWorkers is the agents' --workers: how many pods, and
	// so unprepare calls, a kill can interrupt.
	chaosAgentWorkers = 2
	chaosGates        = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,DRAWorkloadResourceClaims=true"
	// chaosSettleBound: after the faults stop, every pod is Running or
	// Pending with a reason within this.
	chaosSettleBound = 3 * time.Minute
	// chaosStaleBound: a claim reserved for a pod that is gone, or a
	// nomination of a node that is gone, lasts at most this (the settle
	// time of one fault: a server restart, a resync).
	chaosStaleBound = 45 * time.Second
	// chaosLongEnv=1 runs the long mix (make test-reliability
	// RELIABILITY_LONG=1).
	chaosLongEnv = "DRAPLANE_CHAOS_LONG"
	// The replicas' leader election: a killed leader's lease is taken
	// over within a few seconds.
	chaosLeaseDuration = 4 * time.Second
	chaosRenewDeadline = 3 * time.Second
	chaosRetryPeriod   = 500 * time.Millisecond
	// chaosHandoverBound: after a kill of the leader, another replica
	// holds the lease within this.
	chaosHandoverBound = 30 * time.Second
)

// chaosMix is how long the workload and the faults run and how often a
// fault comes.
type chaosMix struct {
	name          string
	duration      time.Duration
	faultEvery    time.Duration
	maxSinglePods int
}

func chaosMixFromEnv() chaosMix {
	if os.Getenv(chaosLongEnv) != "" {
		return chaosMix{name: "long", duration: 6 * time.Minute, faultEvery: 8 * time.Second, maxSinglePods: 60}
	}
	return chaosMix{name: "short", duration: 60 * time.Second, faultEvery: 6 * time.Second, maxSinglePods: 45}
}

// chaosAgent is a node agent and its kubelet plugin, the upstream test
// driver, on one node. The plugin's output is kept across its restarts:
// its PREPARE and UNPREPARE lines, and the CDI spec files it writes into
// cdiDir, are invariant 3's evidence.
type chaosAgent struct {
	node          string
	agent, plugin *launcher.Process
	cdiDir        string

	mu      sync.Mutex
	pastLog string
	kills   int
}

func (a *chaosAgent) pluginLog() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pastLog + a.plugin.Output()
}

func (a *chaosAgent) agentKills() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.kills
}

// killPlugin kills the plugin with kill -9 and starts it again after pause.
func (a *chaosAgent) killPlugin(pause time.Duration) error {
	a.plugin.Kill9()
	time.Sleep(pause)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pastLog += a.plugin.Output()
	return a.plugin.Start()
}

func (a *chaosAgent) killAgent(pause time.Duration) error {
	a.agent.Kill9()
	a.mu.Lock()
	a.kills++
	a.mu.Unlock()
	time.Sleep(pause)
	return a.agent.Start()
}

// chaosCluster is the etcd cluster, the replicas (simulated nodes and
// controllers, each leader-elected) and the node agents.
type chaosCluster struct {
	etcd     *etcdCluster
	replicas []*server
	// api is the replica of the test's clients and kubectl.
	api      *server
	agents   []*chaosAgent
	kube     kubernetes.Interface
	resource resourcev1client.ResourceV1Interface
	// replicaKubes are clients of each replica, for the lease and
	// /metrics.
	replicaKubes []kubernetes.Interface
}

// chaosStats are the figures and the violations, shared by the workload,
// the faults and the checker.
type chaosStats struct {
	mu         sync.Mutex
	counts     map[string]int
	violations []string
	seen       map[string]bool
	// handovers are the times from a kill of the leader to the next
	// holder's acquireTime.
	handovers []string
}

func newChaosStats() *chaosStats {
	return &chaosStats{counts: map[string]int{}, seen: map[string]bool{}}
}

func (s *chaosStats) add(what string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[what] += n
}

func (s *chaosStats) get(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[what]
}

// violate records problems once each.
func (s *chaosStats) violate(invariant string, problems ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range problems {
		msg := invariant + ": " + p
		if !s.seen[msg] {
			s.seen[msg] = true
			s.violations = append(s.violations, fmt.Sprintf("%s (at %s)", msg, time.Now().UTC().Format("15:04:05")))
		}
	}
}

func (s *chaosStats) summary(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for what, n := range s.counts {
		if strings.HasPrefix(what, prefix) {
			parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(what, prefix), n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// TestChaos runs a mix of pods on three dra-apiserver replicas sharing a
// 3-member etcd cluster (one of them, the lease holder, runs the
// controllers), six simulated nodes (two racks) and two nodes of
// `dra-apiserver node-agent`, each with the upstream test driver as its
// kubelet plugin: single pods with template claims, pods of shared
// claims, gangs of 4-16 members with a group claim and a rack topology
// constraint, preemptors of a higher priority, deletions. Faults come
// every few seconds, each kind in turn in a seeded order: kill -9 of a
// replica; kill -9 of the replica that holds the controllers' lease, its
// restart after a pause and the handover; kill -9 of a node agent right
// after its plugin prepared or unprepared a claim (before the pod is
// Running, before the checkpoint write); kill -9 of a plugin and its
// restart; a slice deleted behind its driver's back; a node deleted with
// pods on it. A checker lists the state every second and checks
// invariants 1 (no device in two claims), 3 (never unprepared more than
// once plus the agent's kills; a prepared claim has its CDI spec) and 4
// (no claim reserved for a gone pod, no nomination of a gone node, longer
// than chaosStaleBound); after the faults stop, the system must settle
// (invariant 6: every process running, a replica leading, every pod
// Running or Pending with a reason, work queues empty) with no gang
// partially bound (2); and once every pod is deleted, every claim
// prepared on a node is unprepared there and no CDI spec is left behind
// (3). Invariant 5 is TestCrashSafety's. DRAPLANE_CHAOS_LONG=1 runs six
// minutes instead of one.
func TestChaos(t *testing.T) {
	requireEnabled(t)
	mix := chaosMixFromEnv()
	rng := rand.New(rand.NewSource(seed(t, 4747)))
	faultRNG := rand.New(rand.NewSource(rng.Int63()))
	began := time.Now()
	cl := startChaosCluster(t)
	stats := newChaosStats()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	w := &chaosWorkload{cl: cl, stats: stats, rng: rng, mix: mix, gangs: map[string]gangRecord{}}
	checkerCtx, stopChecker := context.WithCancel(ctx)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		runChaosChecker(checkerCtx, cl, stats)
	}()
	mixCtx, stopMix := context.WithCancel(ctx)
	defer stopMix()
	go func() {
		defer stopMix()
		runChaosFaults(ctx, faultRNG, cl, stats, mix.faultEvery, time.Now().Add(mix.duration))
	}()
	w.run(mixCtx)
	t.Logf("mix %s done after %v: %s", mix.name, time.Since(began).Round(time.Second), stats.summary("op "))

	settled := time.Now()
	settleTime, ok := waitChaosSettled(ctx, t, cl, stats, w.gangs, w.preemptors)
	drainChaos(ctx, t, cl, stats)
	stopChecker()
	<-checked
	reportChaos(t, cl, stats, w, mix, settleTime, ok, time.Since(settled), time.Since(began))
}

// startChaosCluster starts a 3-member etcd cluster, the replicas on it
// and, once they are ready, the node agents and their plugins, and waits
// for every slice.
func startChaosCluster(t *testing.T) *chaosCluster {
	t.Helper()
	driverBinary := filepath.Join(t.TempDir(), "upstreamdriver")
	build := exec.Command("go", "build", "-o", driverBinary, ".")
	build.Dir = filepath.Join(repoRoot, "test", "e2e", "upstreamdriver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/e2e/upstreamdriver: %v\n%s", err, out)
	}
	cl := &chaosCluster{etcd: startEtcdCluster(t, chaosEtcdMembers)}
	cl.replicas = startChaosReplicas(t, cl.etcd)
	cl.api = cl.replicas[len(cl.replicas)-1]
	cl.kube, cl.resource = cl.api.KubeClient(t), cl.api.Client(t).ResourceV1()
	for _, r := range cl.replicas {
		cl.replicaKubes = append(cl.replicaKubes, r.KubeClient(t))
	}
	sockets, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockets) })
	for i := range chaosAgents {
		replica := cl.replicas[i%len(cl.replicas)]
		cl.agents = append(cl.agents, startChaosAgent(t, replica, driverBinary, filepath.Join(sockets, strconv.Itoa(i)), fmt.Sprintf("agent-node-%d", i)))
	}
	kubectlOrFatal(t, cl.api, chaosSetupYAML(), "apply", "-f", "-")
	ctx := context.Background()
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		labelRacks(ctx, cl.kube)
		slices, err := cl.resource.ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		devices := map[string]int{}
		for _, s := range slices.Items {
			devices[s.Spec.Driver] += len(s.Spec.Devices)
		}
		return devices[simDriver] == chaosSimNodes*chaosSimDevices+4 && devices[chaosPlugin] == chaosAgents*chaosAgentDevices, nil
	})
	if err != nil {
		t.Fatalf("slices of the simulated nodes and the plugins did not appear: %v\n%s", err, kubectlOrFatal(t, cl.api, "", "get", "nodes,resourceslices", "-o", "wide"))
	}
	return cl
}

// startChaosReplicas starts the replicas on the etcd cluster. They share
// the first one's CA, as replicas behind one address would: a client
// certificate signed from one data dir is good on every replica.
func startChaosReplicas(t *testing.T, etcd *etcdCluster) []*server {
	t.Helper()
	var replicas []*server
	for i := range chaosReplicas {
		args := append([]string{"--etcd-servers", etcd.Servers,
			fmt.Sprintf("--simulate-nodes=%d", chaosSimNodes), fmt.Sprintf("--simulate-devices-per-node=%d", chaosSimDevices), chaosGates},
			leaderArgs(chaosLeaseDuration, chaosRenewDeadline, chaosRetryPeriod)...)
		replicas = append(replicas, newServer(t, fmt.Sprintf("replica-%d", i), t.TempDir(), args...))
	}
	if err := replicas[0].Start(); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas[1:] {
		if err := os.MkdirAll(filepath.Join(r.DataDir, "pki"), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"ca.crt", "ca.key"} {
			data, err := os.ReadFile(filepath.Join(replicas[0].DataDir, "pki", name))
			if err == nil {
				err = os.WriteFile(filepath.Join(r.DataDir, "pki", name), data, 0o600)
			}
			if err != nil {
				t.Fatalf("share the CA: %v", err)
			}
		}
	}
	errs := make(chan error, len(replicas))
	for _, r := range replicas[1:] {
		go func() { errs <- r.Start() }()
	}
	for range replicas[1:] {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return replicas
}

// startChaosAgent starts a node agent and, once its node is registered,
// the plugin with the node's identity.
func startChaosAgent(t *testing.T, srv *server, driverBinary, dir, node string) *chaosAgent {
	t.Helper()
	registrarDir := filepath.Join(dir, "registry")
	cdiDir := filepath.Join(t.TempDir(), "cdi")
	kubeconfig := filepath.Join(t.TempDir(), "plugin.kubeconfig")
	mint := exec.Command(serverBinary, "client-kubeconfig", "--data-dir", srv.DataDir, "--user", "draplane:node:"+node,
		"--group", "draplane:nodes", "--group", "draplane:driver:"+chaosPlugin, "--output", kubeconfig)
	if out, err := mint.CombinedOutput(); err != nil {
		t.Fatalf("client-kubeconfig: %v\n%s", err, out)
	}
	a := &chaosAgent{node: node, cdiDir: cdiDir,
		agent: &launcher.Process{Name: "node-agent " + node, Binary: serverBinary,
			Args: []string{"node-agent", "--data-dir", srv.DataDir, "--driver", chaosPlugin, "--node-name", node,
				"--plugin-registration-dir", registrarDir, "--checkpoint", filepath.Join(t.TempDir(), "checkpoint.json"),
				"--deregistration-grace-period", "30s", "--workers", strconv.Itoa(chaosAgentWorkers), "-v", "2"},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}},
		plugin: &launcher.Process{Name: "upstreamdriver " + node, Binary: driverBinary,
			Args: []string{"--kubeconfig", kubeconfig, "--node-name", node, "--driver-name", chaosPlugin,
				"--devices", strconv.Itoa(chaosAgentDevices), "--registrar-dir", registrarDir, "--plugin-dir", filepath.Join(dir, "plugin"), "--cdi-dir", cdiDir},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}},
	}
	if err := a.agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.agent.Stop)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		out, _ := kubectl(srv, "", "get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`, "--ignore-not-found")
		return strings.TrimSpace(out) == "True", nil
	})
	if err != nil {
		t.Fatalf("node agent %s did not register its node:\n%s", node, launcher.Tail(a.agent.Output(), 30))
	}
	if err := a.plugin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.plugin.Stop)
	return a
}

func kubectl(s *server, stdin string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", s.Kubeconfig, "--request-timeout", "30s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func kubectlOrFatal(t *testing.T, s *server, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(s, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// labelRacks puts the simulated nodes in two racks; a node the simulator
// registers again after its deletion gets its label back.
func labelRacks(ctx context.Context, kube kubernetes.Interface) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range nodes.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(n.Name, "sim-node-"))
		if err != nil || n.Labels[chaosRackLabel] != "" {
			continue
		}
		rack := "rack-a"
		if i >= chaosSimNodes/2 {
			rack = "rack-b"
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, chaosRackLabel, rack)
		_, _ = kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
}

// chaosSetupYAML: a class of the simulated GPUs that leaves out the four
// fabric devices (a slice for all nodes, for the gangs' group claims),
// templates of 1 and 2 GPUs, of a fabric device and of a device of the
// upstream driver, three shared claims and two priorities.
func chaosSetupYAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: fabric
spec:
  driver: %[1]s
  allNodes: true
  pool:
    name: fabric
    generation: 1
    resourceSliceCount: 1
  devices:
`, simDriver)
	for i := range 4 {
		fmt.Fprintf(&b, "  - name: fabric-%d\n    attributes:\n      model:\n        string: fabric\n", i)
	}
	classes := map[string]string{
		"gpu-only":     fmt.Sprintf(`device.driver == "%[1]s" && device.attributes["%[1]s"].model != "fabric"`, simDriver),
		"fabric":       fmt.Sprintf(`device.driver == "%[1]s" && device.attributes["%[1]s"].model == "fabric"`, simDriver),
		"upstream-gpu": fmt.Sprintf(`device.driver == "%s"`, chaosPlugin),
	}
	for _, name := range sortedNames(classes) {
		fmt.Fprintf(&b, "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: %s\nspec:\n  selectors:\n  - cel:\n      expression: '%s'\n", name, classes[name])
	}
	for _, tmpl := range []struct {
		name, class string
		count       int
	}{{"one-gpu", "gpu-only", 1}, {"two-gpus", "gpu-only", 2}, {"fabric", "fabric", 1}, {"upstream-gpu", "upstream-gpu", 1}} {
		fmt.Fprintf(&b, "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: %s\n          count: %d\n", tmpl.name, tmpl.class, tmpl.count)
	}
	for i := range sharedClaims {
		fmt.Fprintf(&b, "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: shared-%d\n  namespace: default\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu-only\n", i)
	}
	for name, value := range map[string]int{"low": 100, "high": 1000} {
		fmt.Fprintf(&b, "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: %s\nvalue: %d\n", name, value)
	}
	return b.String()
}

// chaosPod is a pod of the priority class with one claim from the
// template, or of the shared claim.
func chaosPod(name, class, template, claim string) *corev1.Pod {
	pod := templatePod(name, template)
	if claim != "" {
		pod = sharedClaimPod(name, claim)
	}
	pod.Spec.PriorityClassName = class
	return pod
}

// gangYAML is a PodGroup with a gang policy, a group claim from the
// fabric template and the rack as its topology, and its pods, each with
// the group's claim and a GPU of its own.
func chaosGangYAML(group string, size, minCount int) string {
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
  schedulingConstraints:
    topology:
    - key: %s
  resourceClaims:
  - name: fabric
    resourceClaimTemplateName: fabric
`, group, minCount, chaosRackLabel)
	for i := range size {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s-%[2]d
  namespace: default
  labels:
    %[3]s: %[1]s
spec:
  priorityClassName: low
  schedulingGroup:
    podGroupName: %[1]s
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
`, group, i, chaosGangLabel)
	}
	return b.String()
}

// chaosWorkload is the mix of pods; it runs in the test's goroutine.
type chaosWorkload struct {
	cl    *chaosCluster
	stats *chaosStats
	rng   *rand.Rand
	mix   chaosMix

	singles    []string
	gangs      map[string]gangRecord
	liveGangs  []string
	preemptors []string
	seq        int
}

func (w *chaosWorkload) run(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		time.Sleep(time.Duration(100+w.rng.Intn(250)) * time.Millisecond)
		if n%20 == 0 {
			labelRacks(ctx, w.cl.kube)
		}
		op, err := w.step(ctx)
		if op == "" {
			continue
		}
		w.stats.add("op "+op, 1)
		if err != nil {
			// The server is killed now and then: errors are expected.
			w.stats.add("op error", 1)
		}
	}
}

// step does one random operation and names it.
func (w *chaosWorkload) step(ctx context.Context) (string, error) {
	pods := w.cl.kube.CoreV1().Pods("default")
	name := fmt.Sprintf("chaos-%04d", w.seq)
	create := func(op string, pod *corev1.Pod) (string, error) {
		w.seq++
		_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		if err == nil || !apierrors.IsAlreadyExists(err) {
			// A create whose answer was lost may have happened.
			w.singles = append(w.singles, pod.Name)
		}
		return op, err
	}
	// More creations than deletions: the nodes fill up, so that the
	// preemptors find no room without preempting.
	switch x := w.rng.Intn(100); {
	case x < 30 && len(w.singles) < w.mix.maxSinglePods:
		template := "one-gpu"
		if w.rng.Intn(3) == 0 {
			template = "two-gpus"
		}
		return create("single pod", chaosPod(name, "low", template, ""))
	case x < 38 && len(w.singles) < w.mix.maxSinglePods:
		return create("pod on an agent node", chaosPod(name, "low", "upstream-gpu", ""))
	case x < 43 && len(w.singles) < w.mix.maxSinglePods:
		return create("shared-claim pod", chaosPod(name, "low", "", fmt.Sprintf("shared-%d", w.rng.Intn(sharedClaims))))
	case x < 50 && len(w.liveGangs) < 3:
		w.seq++
		group := fmt.Sprintf("gang-%04d", w.seq)
		size := 4 + w.rng.Intn(13)
		minCount := size - w.rng.Intn(size/4+1)
		w.gangs[group] = gangRecord{size: size, minCount: minCount}
		w.liveGangs = append(w.liveGangs, group)
		w.stats.add("gang members", size)
		_, err := kubectl(w.cl.api, chaosGangYAML(group, size, minCount), "create", "-f", "-")
		return "gang", err
	case x < 58 && len(w.singles) < w.mix.maxSinglePods+10:
		w.preemptors = append(w.preemptors, name)
		template := "one-gpu"
		if w.rng.Intn(4) == 0 {
			template = "upstream-gpu"
		}
		return create("preemptor", chaosPod(name, "high", template, ""))
	case x < 84 && len(w.singles) > 0:
		i := w.rng.Intn(len(w.singles))
		err := pods.Delete(ctx, w.singles[i], metav1.DeleteOptions{})
		w.singles = append(w.singles[:i], w.singles[i+1:]...)
		if apierrors.IsNotFound(err) {
			err = nil // preempted, on a deleted node, or never created
		}
		return "pod deletion", err
	case x >= 97 && len(w.liveGangs) > 0:
		i := w.rng.Intn(len(w.liveGangs))
		group := w.liveGangs[i]
		w.liveGangs = append(w.liveGangs[:i], w.liveGangs[i+1:]...)
		delete(w.gangs, group)
		_, err := kubectl(w.cl.api, "", "delete", "podgroup,pods", "-n", "default", "-l", chaosGangLabel+"="+group, "--wait=false")
		if err == nil {
			_, err = kubectl(w.cl.api, "", "delete", "podgroup", group, "-n", "default", "--wait=false", "--ignore-not-found")
		}
		return "gang deletion", err
	}
	return "", nil
}

// chaosFault is one kind of fault.
type chaosFault struct {
	name string
	do   func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error)
}

var chaosFaults = []chaosFault{
	{"kill -9 of a replica", func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
		r := cl.replicas[rng.Intn(len(cl.replicas))]
		r.Kill9()
		time.Sleep(time.Duration(rng.Intn(1500)) * time.Millisecond)
		return r.Name, r.Start()
	}},
	{"kill -9 of the controllers' leader", killLeader},
	{"kill -9 of a node agent after its plugin prepared", func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
		return killAgentAfter(ctx, rng, cl, "PREPARE claims=")
	}},
	{"kill -9 of a node agent after its plugin unprepared", func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
		return killAgentAfter(ctx, rng, cl, "UNPREPARE claims=")
	}},
	{"kill -9 of a plugin and its restart", func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
		a := cl.agents[rng.Intn(len(cl.agents))]
		return a.node, a.killPlugin(time.Duration(500+rng.Intn(2500)) * time.Millisecond)
	}},
	{"slice deleted behind its driver's back", func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
		slices, err := cl.resource.ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		var names []string
		for _, s := range slices.Items {
			if s.Name != "fabric" {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			return "", fmt.Errorf("no slice to delete")
		}
		name := names[rng.Intn(len(names))]
		return name, cl.resource.ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{})
	}},
	{"node deleted with pods on it", func(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
		pods, err := cl.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		var nodes []string
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		if len(nodes) == 0 {
			return "", fmt.Errorf("no node with pods")
		}
		node := nodes[rng.Intn(len(nodes))]
		return node, cl.kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	}},
}

// killLeader kills the replica that holds the controllers' lease and,
// after a pause, starts it again; another replica (or the restarted one,
// with a new identity) must take the lease within chaosHandoverBound.
func killLeader(ctx context.Context, rng *rand.Rand, cl *chaosCluster) (string, error) {
	// After a kill of a replica the lease may still name the dead one
	// for a lease duration.
	var id string
	var leader *server
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, chaosHandoverBound, true, func(ctx context.Context) (bool, error) {
		id, _ = cl.leaseHolder(ctx)
		leader = cl.replicaOf(id)
		return leader != nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("the lease holder %q is no running replica that started the controllers", id)
	}
	killed := time.Now()
	leader.Kill9()
	time.Sleep(time.Duration(500+rng.Intn(2500)) * time.Millisecond)
	if err := leader.Start(); err != nil {
		return leader.Name, err
	}
	var next string
	var acquired *metav1.MicroTime
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, chaosHandoverBound, true, func(ctx context.Context) (bool, error) {
		next, acquired = cl.leaseHolder(ctx)
		return next != "" && next != id, nil
	})
	if err != nil {
		return leader.Name, fmt.Errorf("no replica took the lease within %v of the kill of %s (holder %q)", chaosHandoverBound, leader.Name, next)
	}
	handover := time.Since(killed)
	if acquired != nil {
		handover = acquired.Sub(killed)
	}
	return fmt.Sprintf("%s, handover after %v", leader.Name, handover.Round(100*time.Millisecond)), nil
}

// leaseHolder reads the controllers' lease through the first replica
// that answers.
func (cl *chaosCluster) leaseHolder(ctx context.Context) (string, *metav1.MicroTime) {
	for _, kube := range cl.replicaKubes {
		if id, acquired, err := readLease(ctx, kube, controllerName); err == nil {
			return id, acquired
		}
	}
	return "", nil
}

// replicaOf is the running replica that started the controllers with the
// identity, or nil.
func (cl *chaosCluster) replicaOf(identity string) *server {
	for _, r := range cl.replicas {
		if !r.Running() {
			continue
		}
		for _, term := range leaderTerms(r) {
			if identity != "" && term == identity {
				return r
			}
		}
	}
	return nil
}

// killAgentAfter waits (at most 20 s) for a node agent's plugin to print
// a new call of the kind and kills the agent right then: after the
// plugin's work and, most of the time, before the agent's next step (the
// pod marked Running, the checkpoint written). It starts the agent again.
func killAgentAfter(ctx context.Context, rng *rand.Rand, cl *chaosCluster, prefix string) (string, error) {
	a := cl.agents[rng.Intn(len(cl.agents))]
	before := strings.Count(a.pluginLog(), "\n"+prefix)
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(a.pluginLog(), "\n"+prefix) == before && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	timed := "right after the call"
	if strings.Count(a.pluginLog(), "\n"+prefix) == before {
		timed = "no call came: at a random moment"
	}
	return a.node + ", " + timed, a.killAgent(time.Duration(300+rng.Intn(1200)) * time.Millisecond)
}

// runChaosFaults injects a fault every interval or so until the end of
// the mix, every kind in turn, in an order drawn anew for each round, and
// past the end until each kind came once. A process that does not come
// back is a violation.
func runChaosFaults(ctx context.Context, rng *rand.Rand, cl *chaosCluster, stats *chaosStats, every time.Duration, end time.Time) {
	var deck []int
	injected := map[string]bool{}
	for time.Now().Before(end) || len(injected) < len(chaosFaults) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every/2 + time.Duration(rng.Int63n(int64(every)))):
		}
		if len(deck) == 0 {
			deck = rng.Perm(len(chaosFaults))
		}
		f := chaosFaults[deck[0]]
		deck = deck[1:]
		// The fault runs to its end (a restart included) even after the
		// mix is over.
		what, err := f.do(context.Background(), rng, cl)
		injected[f.name] = true
		stats.add("fault "+f.name, 1)
		if err != nil {
			stats.add("fault errors", 1)
			if strings.HasPrefix(f.name, "kill") {
				stats.violate("a process did not come back", fmt.Sprintf("%s (%s): %v", f.name, what, err))
			}
		}
		if strings.Contains(what, "right after the call") {
			stats.add("fault "+f.name+" (right after the call)", 1)
		}
		if _, handover, ok := strings.Cut(what, "handover after "); ok {
			stats.mu.Lock()
			stats.handovers = append(stats.handovers, handover)
			stats.mu.Unlock()
		}
	}
}

// snapshot lists pods, claims and nodes; nil while the server is down.
func (cl *chaosCluster) snapshot(ctx context.Context) *chaosSnapshot {
	pods, err := cl.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	claims, err := cl.resource.ResourceClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	nodes, err := cl.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	s := &chaosSnapshot{at: time.Now(), pods: pods.Items, claims: claims.Items, nodes: map[string]bool{}}
	for _, n := range nodes.Items {
		s.nodes[n.Name] = true
	}
	return s
}

// chaosCDIBound: a claim prepared on a node lacks its CDI spec for at
// most this (the moments between the driver's file operation and its log
// line).
const chaosCDIBound = 3 * time.Second

// cdiFiles lists the plugin's CDI dir.
func (a *chaosAgent) cdiFiles() ([]string, error) {
	entries, err := os.ReadDir(a.cdiDir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// runChaosChecker checks invariants 1, 3 (no more unprepares than
// allowed, none of a claim never prepared, a prepared claim's CDI spec in
// place) and 4 every second until ctx ends.
func runChaosChecker(ctx context.Context, cl *chaosCluster, stats *chaosStats) {
	stale, cdiStale := newStaleTracker(), newStaleTracker()
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		// The CDI dirs first, then the logs: a claim the log says is
		// prepared was prepared before the listing.
		cdiFiles := map[string]map[string]bool{}
		prepared := map[string]map[string]bool{}
		for _, a := range cl.agents {
			files, err := a.cdiFiles()
			if err != nil {
				stats.violate("invariant 3", fmt.Sprintf("CDI dir of %s: %v", a.node, err))
			}
			cdiFiles[a.node] = map[string]bool{}
			for _, f := range files {
				cdiFiles[a.node][f] = true
			}
		}
		for _, a := range cl.agents {
			calls := parsePluginLog(a.pluginLog())
			prepared[a.node] = calls.prepared
			problems, _ := unprepareProblems(a.node, calls, a.agentKills(), chaosAgentWorkers)
			var now []string
			for _, p := range problems {
				if !strings.Contains(p, "never unprepared") {
					now = append(now, p)
				}
			}
			stats.violate("invariant 3", now...)
			stats.add("check invariant 3", 1)
		}
		s := cl.snapshot(ctx)
		if s == nil {
			stats.add("checker rounds with the API replica down", 1)
			continue
		}
		stats.violate("invariant 1", doubleAllocations(s.claims)...)
		stats.add("check invariant 1", 1)
		stats.violate("invariant 4", stale.observe(s.at, staleReferences(*s), chaosStaleBound)...)
		stats.add("check invariant 4", 1)
		missing := map[string]string{}
		for _, a := range cl.agents {
			maps.Copy(missing, missingCDISpecs(a.node, prepared[a.node], s.claims, cdiFiles[a.node]))
		}
		stats.violate("invariant 3", cdiStale.observe(s.at, missing, chaosCDIBound)...)
		stats.add("check invariant 3 (CDI specs of prepared claims)", 1)
		bound := map[string]int{}
		for _, p := range s.pods {
			if g := p.Labels[chaosGangLabel]; g != "" && p.Spec.NodeName != "" {
				bound[g]++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Reason == "PreemptionByScheduler" {
					stats.mu.Lock()
					if !stats.seen["victim "+string(p.UID)] {
						stats.seen["victim "+string(p.UID)] = true
						stats.counts["preemption victims seen"]++
					}
					stats.mu.Unlock()
				}
			}
		}
		for g, n := range bound {
			stats.mu.Lock()
			if n >= 4 && !stats.seen["gang bound "+g] {
				stats.seen["gang bound "+g] = true
				stats.counts["gangs seen bound"]++
			}
			stats.mu.Unlock()
		}
	}
}

// queueDepth sums the workqueue_depth gauges of every replica's /metrics
// (the leader's queues; the others have none); found is false if none
// has any.
func (cl *chaosCluster) queueDepth(ctx context.Context) (depth float64, found bool, err error) {
	return cl.metricSum(ctx, "workqueue_depth{")
}

// metricSum adds up the samples of the metric whose lines start with
// prefix over every replica's /metrics; found says whether any had one.
func (cl *chaosCluster) metricSum(ctx context.Context, prefix string) (sum float64, found bool, err error) {
	for i, kube := range cl.replicaKubes {
		raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", cl.replicas[i].Name, err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err == nil {
				sum += v
				found = true
			}
		}
	}
	return sum, found, nil
}

// waitChaosSettled waits, at most chaosSettleBound, until every process
// runs, a running replica leads the controllers and the state passes
// settleProblems (invariants 4 and 6) and partialGangs (2) with empty work
// queues; it returns how long that took.
func waitChaosSettled(ctx context.Context, t *testing.T, cl *chaosCluster, stats *chaosStats, gangs map[string]gangRecord, preemptors []string) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	var problems, lastListed []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, chaosSettleBound, true, func(ctx context.Context) (bool, error) {
		problems = nil
		for _, r := range cl.replicas {
			if !r.Running() {
				problems = append(problems, r.Name+" is not running")
			}
		}
		if id, _ := cl.leaseHolder(ctx); cl.replicaOf(id) == nil {
			problems = append(problems, fmt.Sprintf("the controllers' lease holder %q is no running replica that started the controllers", id))
		}
		for _, a := range cl.agents {
			if !a.agent.Running() || !a.plugin.Running() {
				problems = append(problems, "the agent or the plugin of "+a.node+" is not running")
			}
		}
		s := cl.snapshot(ctx)
		if s == nil {
			// With what the last listing found: the poll's own deadline
			// fails the last listing, and would hide the reason.
			problems = append(append(problems, "the state could not be listed"), lastListed...)
			return false, nil
		}
		listed := settleProblems(*s)
		gangProblems, judged := partialGangs(*s, gangs)
		listed = append(listed, gangProblems...)
		lastListed = listed
		problems = append(problems, listed...)
		depth, found, err := cl.queueDepth(ctx)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("/metrics: %v", err))
		case found && depth > 0:
			problems = append(problems, fmt.Sprintf("%v items in the work queues", depth))
		}
		if len(problems) == 0 {
			stats.add("gangs judged at settle", judged)
			countPreemptors(s, preemptors, stats)
			stats.add("queue depth metric found", map[bool]int{true: 1}[found])
		}
		return len(problems) == 0, nil
	})
	stats.add("check invariant 2", 1)
	stats.add("check invariant 6", 1)
	if err != nil {
		stats.violate("invariant 6 (and 2, 4)", fmt.Sprintf("not settled %v after the faults stopped: %s", chaosSettleBound, strings.Join(firstN(problems, 15), "; ")))
		t.Logf("unsettled state:\n%s", kubectlOrLog(cl.api, "get", "nodes,pods,resourceclaims,podgroups", "-o", "wide"))
		return time.Since(start), false
	}
	return time.Since(start), true
}

// countPreemptors counts the preemptors, at settle, that run and that
// wait with a reason (settleProblems made sure that there is one).
func countPreemptors(s *chaosSnapshot, preemptors []string, stats *chaosStats) {
	names := map[string]bool{}
	for _, name := range preemptors {
		names[name] = true
	}
	for _, p := range s.pods {
		if names[p.Name] {
			stats.add("preemptors at settle "+string(p.Status.Phase), 1)
		}
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func kubectlOrLog(s *server, args ...string) string {
	out, err := kubectl(s, "", args...)
	if err != nil {
		return err.Error()
	}
	return out
}

// drainChaos deletes every pod and gang and waits (at most 2 minutes)
// until each claim prepared on an agent's node has been unprepared there
// (invariant 3 in full) and, with every pod gone, the controllers hold no
// nomination (invariant 4 for what the API does not show).
func drainChaos(ctx context.Context, t *testing.T, cl *chaosCluster, stats *chaosStats) {
	t.Helper()
	if _, err := kubectl(cl.api, "", "delete", "pods,podgroups", "--all", "-n", "default", "--wait=false"); err != nil {
		t.Errorf("delete every pod: %v", err)
	}
	var problems []string
	var nominationProblem string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s := cl.snapshot(ctx)
		if s == nil {
			// Keep what the last listing found: the poll's own deadline
			// fails the last listing, and would hide the reason.
			if len(problems) == 0 {
				problems = append(problems, "the state could not be listed")
			}
			return false, nil
		}
		problems = nil
		for _, p := range s.pods {
			problems = append(problems, "pod "+p.Name+" still exists")
		}
		for _, a := range cl.agents {
			p, _ := unprepareProblems(a.node, parsePluginLog(a.pluginLog()), a.agentKills(), chaosAgentWorkers)
			problems = append(problems, p...)
		}
		if len(s.pods) == 0 {
			// Invariant 4 inside the controller: with every pod gone, no
			// nomination may hold devices (they are not in the API).
			held, found, err := cl.metricSum(ctx, "draplane_allocation_controller_nominations ")
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("/metrics: %v", err))
			case !found:
				problems = append(problems, "no replica reports draplane_allocation_controller_nominations")
			case held > 0:
				nominationProblem = fmt.Sprintf("%v nominations held by the controllers after every pod is gone", held)
				problems = append(problems, nominationProblem)
			}
		}
		return len(problems) == 0, nil
	})
	stats.add("check invariant 3", 1)
	stats.add("check invariant 4 (controller nominations after the drain)", 1)
	if err != nil {
		if nominationProblem != "" && slices.Contains(problems, nominationProblem) {
			stats.violate("invariant 4", nominationProblem)
			problems = slices.DeleteFunc(problems, func(p string) bool { return p == nominationProblem })
		}
		if len(problems) > 0 {
			stats.violate("invariant 3", firstN(problems, 15)...)
		}
	}
	for _, a := range cl.agents {
		calls := parsePluginLog(a.pluginLog())
		_, repeats := unprepareProblems(a.node, calls, a.agentKills(), chaosAgentWorkers)
		for _, n := range calls.prepares {
			stats.add("prepare calls per claim", n)
		}
		for _, n := range calls.unprepares {
			stats.add("unprepare calls per claim", n)
		}
		stats.add("claims prepared", len(calls.prepares))
		stats.add("claims unprepared", len(calls.unprepares))
		stats.add("repeated unprepares (agent killed before its checkpoint write)", repeats)
		// Every claim was unprepared: no CDI spec may be left.
		files, err := a.cdiFiles()
		if err != nil {
			stats.violate("invariant 3", fmt.Sprintf("CDI dir of %s: %v", a.node, err))
		}
		stats.violate("invariant 3", leftoverCDISpecs(a.node, a.cdiDir, files)...)
		stats.add("check invariant 3 (CDI dirs empty)", 1)
	}
}

// reportChaos fails the test on every violation and on a workload that
// did not happen, and logs the figures.
func reportChaos(t *testing.T, cl *chaosCluster, stats *chaosStats, w *chaosWorkload, mix chaosMix, settle time.Duration, settled bool, afterMix, wall time.Duration) {
	t.Helper()
	events, _ := kubectl(cl.api, "", "get", "events", "-n", "default", "--field-selector", "reason=Preempted", "-o", "name")
	preempted := len(strings.Fields(events))
	stats.mu.Lock()
	violations := append([]string(nil), stats.violations...)
	stats.mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	faultKinds := 0
	for _, f := range chaosFaults {
		if stats.get("fault "+f.name) > 0 {
			faultKinds++
		}
	}
	for _, floor := range []struct {
		what      string
		got, want int
	}{
		{"kinds of fault injected", faultKinds, len(chaosFaults)},
		{"gangs created", len(w.gangs) + stats.get("op gang deletion"), 2},
		{"preemptors created", len(w.preemptors), 3},
		{"gangs seen bound", stats.get("gangs seen bound"), 1},
		{"claims prepared by the plugins", stats.get("claims prepared"), 3},
		{"checks of invariant 1", stats.get("check invariant 1"), 10},
	} {
		if floor.got < floor.want {
			t.Errorf("the mix did not happen: %d %s, want at least %d", floor.got, floor.what, floor.want)
		}
	}
	if !settled {
		t.Errorf("not settled within %v", chaosSettleBound)
	}
	t.Logf("chaos (%s mix, %v): faults: %s", mix.name, mix.duration, stats.summary("fault "))
	stats.mu.Lock()
	t.Logf("chaos: %d replicas on %d etcd members; controllers' lease taken over after each kill of the leader in: %s", chaosReplicas, chaosEtcdMembers, strings.Join(stats.handovers, " "))
	stats.mu.Unlock()
	t.Logf("chaos: workload: %s; %d pods created outside gangs (%d preemptors; at settle: %s), %d gang members in %d gangs (%d seen bound), %d Preempted events, %d victims seen by the checker",
		stats.summary("op "), w.seq-stats.get("op gang"), len(w.preemptors), stats.summary("preemptors at settle "), stats.get("gang members"), stats.get("op gang"), stats.get("gangs seen bound"), preempted, stats.get("preemption victims seen"))
	t.Logf("chaos: plugins: %d claims prepared (%d prepare calls per claim in all), %d claims unprepared (%d unprepare calls per claim in all), %d repeated unprepares after an agent kill",
		stats.get("claims prepared"), stats.get("prepare calls per claim"), stats.get("claims unprepared"), stats.get("unprepare calls per claim"), stats.get("repeated unprepares (agent killed before its checkpoint write)"))
	t.Logf("chaos: checks: %s; %d gangs judged at settle; %d checker rounds with the API replica down; queue depth metric found: %v",
		stats.summary("check "), stats.get("gangs judged at settle"), stats.get("checker rounds with the API replica down"), stats.get("queue depth metric found") > 0)
	t.Logf("chaos: settled %v after the mix (drain to the last unprepare: %v after the mix); wall time %v", settle.Round(time.Second), afterMix.Round(time.Second), wall.Round(time.Second))
}
