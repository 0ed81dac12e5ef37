package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestResourcePools: `kubectl get resourcepools` shows each simulated
// node's pool; placing a pod lowers its free count and deleting the pod
// raises it again, `kubectl get resourcepools -w` prints both changes, and
// a DeviceTaintRule's devices are counted as tainted and not free. The
// delay from the claim's allocation (as a watch of claims sees it) to the
// pool's change (as a watch of resourcepools sees it) is logged.
func TestResourcePools(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=2")
	ctx := context.Background()
	client := s.Client(t)
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(repoRoot, "examples", "quickstart", "02-resourceclaimtemplates.yaml"))

	freeOf := func(out string) map[string]string {
		free := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 7 && f[0] != "NAME" {
				free[f[2]] = f[5] // node -> free
			}
		}
		return free
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		free := freeOf(s.MustKubectl(t, "", "get", "resourcepools"))
		return free["sim-node-0"] == "2" && free["sim-node-1"] == "2", nil
	}); err != nil {
		t.Fatalf("pools of the simulated nodes never showed 2 free devices each:\n%s", s.MustKubectl(t, "", "get", "resourcepools"))
	}
	out := s.MustKubectl(t, "", "get", "resourcepools", "--field-selector", "status.nodeName=sim-node-1")
	if got := freeOf(out); len(got) != 1 || got["sim-node-1"] != "2" {
		t.Errorf("field selector status.nodeName=sim-node-1:\n%s", out)
	}
	detail := s.MustKubectl(t, "", "get", "resourcepools", "gpu.sim.draplane.dev:sim-node-0", "-o", "yaml")
	for _, want := range []string{"kind: ResourcePoolUsage", "name: gpu.sim.draplane.dev", "total: 2", "complete: true"} {
		if !strings.Contains(detail, want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, detail)
		}
	}

	// kubectl get -w in the background.
	requireKubectl(t)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	cmd := exec.CommandContext(watchCtx, kubectlPath, append(s.kubectlFlags(), "get", "resourcepools", "-w", "--no-headers")...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var watched []string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			watched = append(watched, sc.Text())
			mu.Unlock()
		}
	}()
	defer func() { _ = cmd.Wait() }()
	defer stopWatch()

	claims, err := client.ResourceV1().ResourceClaims("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Stop()
	pools, err := client.ResourceV1().ResourcePoolUsages().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pools.Stop()

	s.MustKubectl(t, claimPodYAML("rp-pod", "gpu", "template=one-gpu"), "apply", "-f", "-")

	// allocated: when the claim watch saw the allocation; changed: when the
	// pool watch saw free drop on the claim's node.
	var allocatedAt, changedAt time.Time
	var node string
	timeout := time.After(pollTimeout)
	for changedAt.IsZero() || allocatedAt.IsZero() {
		select {
		case ev := <-claims.ResultChan():
			c, ok := ev.Object.(*resourcev1.ResourceClaim)
			if ok && allocatedAt.IsZero() && c.Status.Allocation != nil {
				allocatedAt = time.Now()
				node = c.Status.Allocation.Devices.Results[0].Pool
			}
		case ev := <-pools.ResultChan():
			p, ok := ev.Object.(*resourcev1.ResourcePoolUsage)
			if ok && ev.Type == watch.Modified && p.Status.Devices.Free == 1 && p.Status.Devices.Allocated == 1 {
				changedAt = time.Now()
				if node != "" && p.Status.NodeName != node {
					t.Errorf("pool of %s changed, the claim is on %s", p.Status.NodeName, node)
				}
			}
		case <-timeout:
			t.Fatalf("no allocation or no pool change:\n%s", s.MustKubectl(t, "", "get", "pods,resourceclaims,resourcepools", "-A", "-o", "wide"))
		}
	}
	t.Logf("pool showed the allocation %v after the claim watch saw it", changedAt.Sub(allocatedAt))

	s.MustKubectl(t, "", "delete", "pod", "rp-pod", "--wait=true")
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		p, err := client.ResourceV1().ResourcePoolUsages().Get(ctx, "gpu.sim.draplane.dev:"+node, metav1.GetOptions{})
		return err == nil && p.Status.Devices.Free == 2 && p.Status.Devices.Allocated == 0, nil
	}); err != nil {
		t.Fatalf("free count of %s did not come back:\n%s", node, s.MustKubectl(t, "", "get", "resourcepools,resourceclaims", "-A"))
	}

	// kubectl -w printed the drop and the return on that node.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		sawDrop := false
		for _, line := range watched {
			f := strings.Fields(line)
			if len(f) != 7 || f[2] != node {
				continue
			}
			if f[5] == "1" && f[4] == "1" {
				sawDrop = true
			}
			if sawDrop && f[5] == "2" && f[4] == "0" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		mu.Lock()
		t.Errorf("kubectl get resourcepools -w did not print the drop and the return on %s:\n%s", node, strings.Join(watched, "\n"))
		mu.Unlock()
	}

	// A NoSchedule rule on sim-node-1's pool taints both its devices.
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: rp-maintenance
spec:
  deviceSelector:
    driver: gpu.sim.draplane.dev
    pool: sim-node-1
  taint:
    key: maintenance
    effect: NoSchedule
`, "apply", "-f", "-")
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		p, err := client.ResourceV1().ResourcePoolUsages().Get(ctx, "gpu.sim.draplane.dev:sim-node-1", metav1.GetOptions{})
		return err == nil && p.Status.Devices.Tainted == 2 && p.Status.Devices.TaintedNoSchedule == 2 && p.Status.Devices.Free == 0, nil
	}); err != nil {
		t.Fatalf("tainted devices not counted:\n%s", s.MustKubectl(t, "", "get", "resourcepools", "-o", "yaml"))
	}
	out = s.MustKubectl(t, "", "get", "resourcepools", "--field-selector", "status.nodeName=sim-node-1", "--no-headers")
	if f := strings.Fields(out); len(f) != 7 || f[6] != "2" || f[5] != "0" {
		t.Errorf("table of the tainted pool: %q, want tainted 2 and free 0", out)
	}

	// The same numbers on /metrics.
	metrics := s.MustKubectl(t, "", "get", "--raw", "/metrics")
	for _, want := range []string{
		`draplane_resourcepool_devices{driver="gpu.sim.draplane.dev",node="sim-node-1",pool="sim-node-1",state="tainted"} 2`,
		`draplane_resourcepool_devices{driver="gpu.sim.draplane.dev",node="sim-node-1",pool="sim-node-1",state="free"} 0`,
		`draplane_deviceclass_devices{class="gpu.sim.draplane.dev",state="total"} 4`,
		`draplane_deviceclass_devices{class="gpu.sim.draplane.dev",state="free"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
