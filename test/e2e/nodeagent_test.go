package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/draplane/draplane/test/launcher"
)

const (
	agentNode = "agent-node-0"
	// agentGracePeriod is the agent's --deregistration-grace-period:
	// longer than the plugin takes to restart, short for a test.
	agentGracePeriod = 8 * time.Second
)

// buildUpstreamDriver builds test/e2e/upstreamdriver, a DRA driver on
// k8s.io/dynamic-resource-allocation's kubeletplugin in a module of its
// own, into a temp dir.
func buildUpstreamDriver(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "upstreamdriver")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = filepath.Join(repoRoot, "test", "e2e", "upstreamdriver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/e2e/upstreamdriver: %v\n%s", err, out)
	}
	return binary
}

// upstreamDriverObjects are, for the test driver's devices, the
// DeviceClass upstream-gpu, the ResourceClaimTemplate upstream-gpu and a
// ResourceClaim of the given name that the driver fails to prepare, all
// through resource.k8s.io/v1.
func upstreamDriverObjects(failingClaim string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: upstream-gpu
spec:
  selectors:
  - cel:
      expression: device.driver == "%[1]s"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: upstream-gpu
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: upstream-gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: %[2]s
  namespace: default
  annotations:
    upstream.example.com/prepare-error: device is on fire
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: upstream-gpu
`, upstreamPlugin, failingClaim)
}

// socketDir is a short temp dir for Unix sockets (their paths must stay
// under 108 bytes: no test name in them).
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestNodeAgentWithUpstreamDriver runs the whole life of claims on a node
// with `dra-apiserver node-agent` playing the kubelet and an unmodified
// kubelet plugin built on k8s.io/dynamic-resource-allocation, each its
// own process, every step seen through kubectl:
//  1. the plugin registers and its slices appear;
//  2. a pod with a template claim runs after exactly one
//     NodePrepareResources call carrying that claim, and the CDI IDs the
//     call returned show in an event;
//  3. a claim the driver fails keeps its pod Pending with an event naming
//     the claim;
//  4. deleting the pod leads to exactly one NodeUnprepareResources;
//  5. the agent is killed with kill -9, a pod is deleted while it is down,
//     and the agent starts again: that claim is unprepared once and the
//     surviving pod is not prepared again;
//  6. the plugin restarts and registers again, with no duplicate slices;
//     back within the agent's --deregistration-grace-period, it keeps its
//     slice untouched (same UID and resourceVersion);
//  7. the health the plugin reports reaches the pod's status;
//  8. the plugin stopped for longer than the grace period loses its
//     slice, not before the period is over.
//
// The agent and the plugin run with the node's identity, not the admin's:
// the agent mints its own (user draplane:node:<node>) from the data dir's
// CA, the plugin gets one from client-kubeconfig, and what the agent's
// identity may not do (list claims, read another node's claim, write
// another node) is refused with 403.
func TestNodeAgentWithUpstreamDriver(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=0")
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	driverBinary := buildUpstreamDriver(t)
	sockets := socketDir(t)
	registrarDir := filepath.Join(sockets, "plugins_registry")
	pluginDir := filepath.Join(sockets, "plugins", upstreamPlugin)
	checkpoint := filepath.Join(t.TempDir(), "checkpoint.json")

	agent := &launcher.Process{Name: "node-agent", Binary: serverBinary,
		Args: []string{"node-agent", "--data-dir", s.dataDir, "--driver", upstreamPlugin, "--node-name", agentNode,
			"--plugin-registration-dir", registrarDir, "--checkpoint", checkpoint,
			"--deregistration-grace-period", agentGracePeriod.String(), "-v", "2"},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	pluginKubeconfig := mintKubeconfig(t, s, "draplane:node:"+agentNode, "draplane:nodes", "draplane:driver:"+upstreamPlugin)
	drv := &launcher.Process{Name: "upstreamdriver", Binary: driverBinary,
		Args: []string{"--kubeconfig", pluginKubeconfig, "--node-name", agentNode, "--driver-name", upstreamPlugin,
			"--devices", "2", "--registrar-dir", registrarDir, "--plugin-dir", pluginDir, "--unhealthy-device", "gpu-1", "-v", "2"},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}

	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(pollTimeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %v\nagent:\n%s\ndriver:\n%s\n%s", what, pollTimeout,
					launcher.Tail(agent.Output(), 40), launcher.Tail(drv.Output(), 20),
					s.MustKubectl(t, "", "get", "nodes,pods,resourceslices,resourceclaims,events", "-A", "-o", "wide"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	calls := func(kind string) []string {
		var out []string
		for line := range strings.SplitSeq(drv.Output(), "\n") {
			if rest, ok := strings.CutPrefix(line, kind+" claims="); ok {
				out = append(out, rest)
			}
		}
		return out
	}
	podPhase := func(name string) corev1.PodPhase {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return pod.Status.Phase
	}
	claimOf := func(pod string) string {
		return strings.TrimSpace(s.MustKubectl(t, "", "get", "pod", pod, "-o", "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}"))
	}
	nodeSlices := func() []string {
		return strings.Fields(s.MustKubectl(t, "", "get", "resourceslices.resource.k8s.io", "--field-selector", "spec.nodeName="+agentNode, "-o", "name"))
	}

	// The agent registers the node, Ready; then the plugin can start
	// (its slice controller makes the Node the owner of its slices).
	eventually("the agent registers its node Ready", func() bool {
		return strings.TrimSpace(s.MustKubectl(t, "", "get", "node", agentNode, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`, "--ignore-not-found")) == "True"
	})
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)

	// 1. Registered; its slice appears.
	eventually("the plugin registers with the agent", func() bool {
		return registrations(agent.Output()) > 0
	})
	eventually("the plugin's slice appears", func() bool { return len(nodeSlices()) == 1 })

	s.MustKubectl(t, upstreamDriverObjects("on-fire"), "apply", "-f", "-")

	// 2. A pod with a template claim: Running after one prepare call
	// carrying its claim; the CDI IDs in an event.
	s.MustKubectl(t, claimPodYAML("good", "gpu", "template=upstream-gpu"), "apply", "-f", "-")
	eventually("pod good Running", func() bool { return podPhase("good") == corev1.PodRunning })
	goodClaim := "default/" + claimOf("good")
	// The driver's output is read as it comes: wait for the line first.
	eventually("the driver printed its prepare call", func() bool { return len(calls("PREPARE")) >= 1 })
	if got := calls("PREPARE"); len(got) != 1 || got[0] != goodClaim {
		t.Errorf("prepare calls %q, want exactly one carrying %s", got, goodClaim)
	}
	// The agent did that as its node: the identity it minted is the
	// node's, and the server refuses it what is not the node's.
	agentKubeconfig := filepath.Join(s.dataDir, "node-agent", agentNode, "kubeconfig")
	if out := s.MustKubectl(t, "", "--kubeconfig", agentKubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); out != "draplane:node:"+agentNode {
		t.Errorf("the agent's identity is %q, want draplane:node:%s", out, agentNode)
	}
	for _, args := range [][]string{
		{"get", "resourceclaims", "-A"},
		{"delete", "node", "other-node"},
	} {
		out, err := s.Kubectl(t, "", append([]string{"--kubeconfig", agentKubeconfig}, args...)...)
		if err == nil || !strings.Contains(out, "Forbidden") {
			t.Errorf("kubectl %s as the agent: %v %s, want Forbidden", strings.Join(args, " "), err, out)
		}
	}
	eventually("the CDI IDs of pod good in an event", func() bool {
		return strings.Contains(s.MustKubectl(t, "", "get", "events", "--field-selector", "involvedObject.name=good,reason=PreparedDynamicResources", "-o", "jsonpath={.items[*].message}"),
			"CDI "+upstreamPlugin+"/gpu=gpu-")
	})

	// 7. The health the plugin reports for good's device (gpu-1 is
	// reported Unhealthy, the others Healthy) reaches its status.
	device := strings.TrimSpace(s.MustKubectl(t, "", "get", "resourceclaims", "-n", "default", strings.TrimPrefix(goodClaim, "default/"), "-o", "jsonpath={.status.allocation.devices.results[0].device}"))
	wantHealth := "Healthy"
	if device == "gpu-1" {
		wantHealth = "Unhealthy"
	}
	// Named after the container's resources.claims entry: the pod claim
	// gpu, no request (the API refuses other names).
	wantStatus := `[{"name":"claim:gpu","resources":[{"health":"` + wantHealth + `","resourceID":"` + upstreamPlugin + "/" + agentNode + "/" + device + `"}]}]`
	eventually("device health in pod good's status", func() bool {
		got := s.MustKubectl(t, "", "get", "pod", "good", "-o", "jsonpath={.status.containerStatuses[0].allocatedResourcesStatus}")
		return equalJSONText(got, wantStatus)
	})

	// 3. A claim the driver fails: Pending, an event names the claim.
	s.MustKubectl(t, claimPodYAML("burning", "gpu", "claim=on-fire"), "apply", "-f", "-")
	eventually("pod burning's event names its claim", func() bool {
		return strings.Contains(s.MustKubectl(t, "", "get", "events", "--field-selector", "involvedObject.name=burning,reason=FailedPrepareDynamicResources", "-o", "jsonpath={.items[*].message}"),
			"Failed to prepare claim on-fire with driver "+upstreamPlugin+": ")
	})
	if phase := podPhase("burning"); phase != corev1.PodPending {
		t.Errorf("pod burning is %s, want Pending", phase)
	}
	s.MustKubectl(t, "", "delete", "pod", "burning", "--grace-period=0", "--force")
	s.MustKubectl(t, "", "delete", "resourceclaim.resource.k8s.io", "on-fire", "-n", "default")

	// 4. Deleting the pod: exactly one unprepare call, with its claim.
	s.MustKubectl(t, "", "delete", "pod", "good", "--wait=false")
	eventually("pod good's claim unprepared", func() bool { return len(calls("UNPREPARE")) > 0 })
	if got := calls("UNPREPARE"); len(got) != 1 || got[0] != goodClaim {
		t.Errorf("unprepare calls %q, want exactly one carrying %s", got, goodClaim)
	}

	// 5. kill -9 of the agent; a pod deleted while it is down.
	s.MustKubectl(t, claimPodYAML("survivor", "gpu", "template=upstream-gpu"), "apply", "-f", "-")
	s.MustKubectl(t, claimPodYAML("victim", "gpu", "template=upstream-gpu"), "apply", "-f", "-")
	eventually("pods survivor and victim Running", func() bool {
		return podPhase("survivor") == corev1.PodRunning && podPhase("victim") == corev1.PodRunning
	})
	survivorClaim, victimClaim := "default/"+claimOf("survivor"), "default/"+claimOf("victim")
	eventually("the driver printed the prepare calls of survivor and victim", func() bool {
		got := calls("PREPARE")
		return slices.Contains(got, survivorClaim) && slices.Contains(got, victimClaim)
	})
	prepared := len(calls("PREPARE"))
	agent.Kill9()
	s.MustKubectl(t, "", "delete", "pod", "victim", "--grace-period=0", "--force")
	eventually("pod victim gone", func() bool {
		_, err := kube.CoreV1().Pods("default").Get(ctx, "victim", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	eventually("the deleted pod's claim unprepared after the restart", func() bool { return len(calls("UNPREPARE")) == 2 })
	// The restarted agent has looked at every pod of its checkpoint once
	// the victim's claim is unprepared; give the survivor's sync a moment.
	time.Sleep(2 * time.Second)
	if got := calls("UNPREPARE"); len(got) != 2 || got[1] != victimClaim {
		t.Errorf("unprepare calls %q, want the victim's %s once more", got, victimClaim)
	}
	if got := calls("PREPARE"); len(got) != prepared {
		t.Errorf("prepare calls after the restart %q, want none more than the %d before (the survivor's %s is prepared)", got[prepared:], prepared, survivorClaim)
	}
	if phase := podPhase("survivor"); phase != corev1.PodRunning {
		t.Errorf("pod survivor is %s after the agent's restart, want Running", phase)
	}

	// 6. The plugin restarts and registers again, with no duplicate slices.
	registered := registrations(agent.Output())
	drv.Stop()
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually("the restarted plugin registers again", func() bool {
		return registrations(agent.Output()) > registered
	})
	eventually("one slice of the plugin", func() bool { return len(nodeSlices()) == 1 })
	s.MustKubectl(t, claimPodYAML("after-restart", "gpu", "template=upstream-gpu"), "apply", "-f", "-")
	eventually("a pod runs through the restarted plugin", func() bool { return podPhase("after-restart") == corev1.PodRunning })
	if got := nodeSlices(); len(got) != 1 {
		t.Errorf("slices of the node after the plugin's restart: %v, want one", got)
	}

	// 6, continued. A plugin back within the grace period keeps its
	// slice as it was: not removed, not written.
	sliceVersion := func() string {
		return s.MustKubectl(t, "", "get", "resourceslices.resource.k8s.io", "--field-selector", "spec.nodeName="+agentNode,
			"-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{.metadata.uid}{" "}{.metadata.resourceVersion}{"\n"}{end}`)
	}
	before := sliceVersion()
	registered = registrations(agent.Output())
	stopped := time.Now()
	drv.Stop()
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually("the plugin registers again within the grace period", func() bool {
		return registrations(agent.Output()) > registered
	})
	if back := time.Since(stopped); back >= agentGracePeriod {
		t.Fatalf("the plugin took %v to come back, not within the grace period %v", back, agentGracePeriod)
	}
	// Past the end of the period that its deregistration started.
	time.Sleep(time.Until(stopped.Add(agentGracePeriod + 2*time.Second)))
	if after := sliceVersion(); after != before {
		t.Errorf("the slice of a plugin back within the grace period changed:\nbefore %safter  %s", before, after)
	}

	// 8. Stopped for longer than the grace period: the slice goes, once
	// the period is over.
	stopped = time.Now()
	drv.Stop()
	eventually("the slice of the stopped plugin is removed", func() bool { return len(nodeSlices()) == 0 })
	if gone := time.Since(stopped); gone < agentGracePeriod-time.Second {
		t.Errorf("the slice went %v after the plugin stopped, before the grace period %v was over", gone, agentGracePeriod)
	}
	if !strings.Contains(agent.Output(), "Removed the slices of a driver whose plugin did not come back") {
		t.Errorf("the agent did not log the removal:\n%s", launcher.Tail(agent.Output(), 20))
	}
}

// registrations counts the agent's log lines of the test plugin's
// registrations.
func registrations(log string) int {
	n := 0
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, `"Kubelet plugin"`) && strings.Contains(line, `driver="`+upstreamPlugin+`" registered=true`) {
			n++
		}
	}
	return n
}

// equalJSONText compares two JSON documents as values.
func equalJSONText(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(ax) == string(by)
}
