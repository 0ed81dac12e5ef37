package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/driver/grpcplugin"
	"github.com/draplane/draplane/test/launcher"
)

const (
	upstreamPlugin     = "upstream.example.com"
	upstreamPluginNode = "upstream-node-0"
)

// TestUpstreamDriverThroughGRPCPlugin runs test/e2e/upstreamdriver (a
// driver on k8s.io/dynamic-resource-allocation's kubeletplugin, nothing of
// ours) against the real server, with driver/grpcplugin's Registry in the
// test process playing the kubelet: the driver registers through its
// registration socket (DRA v1 and health v1 chosen), publishes its slices
// through resource.k8s.io/v1, streams device health, and prepares and
// unprepares claims the server's controllers allocated, in one call for
// both claims, one failing with its annotation; killed and started again
// it registers again, once; stopped it deregisters.
func TestUpstreamDriverThroughGRPCPlugin(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=0")
	ctx := context.Background()

	binary := buildUpstreamDriver(t)

	// kubeletplugin's slice controller needs the Node (it owns the slices).
	s.MustKubectl(t, "apiVersion: v1\nkind: Node\nmetadata:\n  name: "+upstreamPluginNode+"\n  labels:\n    kubernetes.io/hostname: "+upstreamPluginNode+"\n", "apply", "-f", "-")
	s.MustKubectl(t, "", "patch", "node", upstreamPluginNode, "--subresource=status", "--type=merge",
		"-p", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Test","message":"test node"}]}}`)

	sockets := socketDir(t)
	registrarDir := filepath.Join(sockets, "plugins_registry")
	pluginDir := filepath.Join(sockets, "plugins", upstreamPlugin)

	var mu sync.Mutex
	var events []string
	var health []grpcplugin.HealthUpdate
	_, logCtx := ktesting.NewTestContext(t)
	runCtx, cancel := context.WithCancel(logCtx)
	registry := grpcplugin.New(grpcplugin.Options{
		Dir: registrarDir,
		OnChange: func(e grpcplugin.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, fmt.Sprintf("%s registered=%v", e.DriverName, e.Registered))
		},
		OnHealth: func(u grpcplugin.HealthUpdate) {
			mu.Lock()
			defer mu.Unlock()
			health = append(health, u)
		},
	})
	done := make(chan error, 1)
	go func() { done <- registry.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Registry.Run: %v", err)
		}
	})
	eventCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(events)
	}

	drv := &launcher.Process{Name: "upstreamdriver", Binary: binary,
		Args: []string{"--kubeconfig", s.Kubeconfig, "--node-name", upstreamPluginNode, "--driver-name", upstreamPlugin,
			"--devices", "2", "--registrar-dir", registrarDir, "--plugin-dir", pluginDir, "--unhealthy-device", "gpu-1", "-v", "2"},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(pollTimeout)
		for !cond() {
			if time.Now().After(deadline) {
				mu.Lock()
				ev := slices.Clone(events)
				mu.Unlock()
				t.Fatalf("%s: not after %v\nregistry events: %v\nplugins: %+v\ndriver output:\n%s\n%s", what, pollTimeout, ev, registry.Plugins(),
					launcher.Tail(drv.Output(), 40), s.MustKubectl(t, "", "get", "nodes,pods,resourceslices,resourceclaims", "-A", "-o", "wide"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	countLines := func(prefix string) int {
		n := 0
		for line := range strings.SplitSeq(drv.Output(), "\n") {
			if strings.HasPrefix(line, prefix) {
				n++
			}
		}
		return n
	}

	// Registration, as the kubelet would do it.
	eventually("the driver registers", func() bool { return len(registry.Plugins()) == 1 })
	want := grpcplugin.Plugin{DriverName: upstreamPlugin, SocketPath: filepath.Join(registrarDir, upstreamPlugin+"-reg.sock"),
		Endpoint: filepath.Join(pluginDir, "dra.sock"), Service: "v1.DRAPlugin", HealthService: "v1.DRAResourceHealth"}
	if got := registry.Plugins()[0]; got != want {
		t.Errorf("registered\n%+v, want\n%+v", got, want)
	}

	// Its slices, written by upstream's slice controller through
	// resource.k8s.io/v1.
	eventually("the driver's slice with its 2 devices appears", func() bool {
		out := s.MustKubectl(t, "", "get", "resourceslices.resource.k8s.io", "--field-selector", "spec.nodeName="+upstreamPluginNode,
			"-o", `jsonpath={range .items[*]}{.spec.driver}{" "}{.spec.pool.name}{":"}{range .spec.devices[*]}{" "}{.name}{end}{"\n"}{end}`)
		return strings.TrimSpace(out) == upstreamPlugin+" "+upstreamPluginNode+": gpu-0 gpu-1"
	})

	// Device health, from kubeletplugin's WatchHealthStatus.
	eventually("device health arrives, gpu-1 Unhealthy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range health {
			got := map[string]grpcplugin.HealthStatus{}
			for _, d := range u.Devices {
				if d.Pool == upstreamPluginNode {
					got[d.Device] = d.Health
				}
			}
			if u.DriverName == upstreamPlugin && reflect.DeepEqual(got, map[string]grpcplugin.HealthStatus{"gpu-0": "Healthy", "gpu-1": "Unhealthy"}) {
				return true
			}
		}
		return false
	})

	// Two pods, one claim each: from a template, and one the driver fails.
	s.MustKubectl(t, upstreamDriverObjects("upstream-broken"), "apply", "-f", "-")
	s.MustKubectl(t, claimPodYAML("upstream-good", "gpu", "template=upstream-gpu")+"---\n"+claimPodYAML("upstream-bad", "gpu", "claim=upstream-broken"), "apply", "-f", "-")

	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	claimOf := func(pod string) string {
		p, err := kube.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != upstreamPluginNode || len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return ""
		}
		return *p.Status.ResourceClaimStatuses[0].ResourceClaimName
	}
	onNode := func(pod string) bool {
		p, err := kube.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == upstreamPluginNode
	}
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	allocated := func(name string) *resourcev1.ResourceClaim {
		if name == "" {
			return nil
		}
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return nil
		}
		return c
	}
	var good, bad *resourcev1.ResourceClaim
	eventually("both pods are on the driver's node with their claims allocated", func() bool {
		// A pod's status names only the claims made from templates.
		good, bad = allocated(claimOf("upstream-good")), allocated("upstream-broken")
		return good != nil && bad != nil && onNode("upstream-bad")
	})
	goodDevice := good.Status.Allocation.Devices.Results[0].Device

	// Prepare both in one call, as the kubelet does for a pod's claims.
	preparer, ok := registry.Preparer(upstreamPlugin)
	if !ok {
		t.Fatal("Preparer: not registered")
	}
	results, failed := driver.Prepare(ctx, preparer, []*resourcev1.ResourceClaim{good, bad})
	wantDevices := []driver.PreparedDevice{{Request: "gpu", Pool: upstreamPluginNode, Device: goodDevice, CDIDeviceIDs: []string{upstreamPlugin + "/gpu=" + goodDevice}}}
	if got := results[good.UID]; len(results) != 1 || !reflect.DeepEqual(got.Devices, wantDevices) {
		t.Errorf("prepare results %+v, want %s with %+v", results, good.Name, wantDevices)
	}
	if len(failed) != 1 || failed[0].Claim.Name != "upstream-broken" || failed[0].Err.Error() != "device is on fire" {
		t.Errorf("failed %v, want upstream-broken: device is on fire", failed)
	}
	prepareLine := "PREPARE claims=default/" + good.Name + ",default/upstream-broken"
	eventually("the driver printed one prepare call", func() bool { return countLines("PREPARE claims=") == 1 })
	if !strings.Contains(drv.Output(), prepareLine+"\n") {
		t.Errorf("driver output lacks %q:\n%s", prepareLine, launcher.Tail(drv.Output(), 20))
	}

	objects := []driver.NamespacedObject{
		{NamespacedName: types.NamespacedName{Namespace: "default", Name: good.Name}, UID: good.UID},
		{NamespacedName: types.NamespacedName{Namespace: "default", Name: bad.Name}, UID: bad.UID},
	}
	if failed := driver.Unprepare(ctx, preparer, objects); len(failed) > 0 {
		t.Errorf("unprepare: %v", failed)
	}
	eventually("the driver printed one unprepare call", func() bool {
		return countLines("UNPREPARE claims=") == 1 && strings.Contains(drv.Output(), "UNPREPARE claims=default/"+good.Name+",default/upstream-broken\n")
	})

	// Killed, the driver leaves its sockets behind: like the kubelet, the
	// Registry keeps the registration (calls fail) until the new process
	// replaces the socket; then it registers again, once.
	if n := eventCount(); n != 1 {
		t.Errorf("%d registry events before the restart, want 1", n)
	}
	drv.Kill9()
	if _, failed := driver.Prepare(ctx, preparer, []*resourcev1.ResourceClaim{good}); len(failed) != 1 {
		t.Errorf("prepare with the driver killed: %v", failed)
	}
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually("the restarted driver registers again", func() bool { return eventCount() == 3 && len(registry.Plugins()) == 1 })
	mu.Lock()
	if want := []string{upstreamPlugin + " registered=true", upstreamPlugin + " registered=false", upstreamPlugin + " registered=true"}; !slices.Equal(events, want) {
		t.Errorf("registry events %v, want %v", events, want)
	}
	mu.Unlock()
	results, failed = driver.Prepare(ctx, preparer, []*resourcev1.ResourceClaim{good})
	if len(failed) > 0 || !reflect.DeepEqual(results[good.UID].Devices, wantDevices) {
		t.Errorf("prepare after the restart: %+v %v", results, failed)
	}
	// The driver's output is read as it comes: wait for the line, then
	// check that there is exactly one.
	eventually("the restarted driver printed its prepare call", func() bool { return countLines("PREPARE claims=default/"+good.Name) >= 1 })
	if n := countLines("PREPARE claims=default/" + good.Name); n != 1 {
		t.Errorf("restarted driver printed %d prepare calls, want 1:\n%s", n, launcher.Tail(drv.Output(), 20))
	}

	// Stopped, it removes its sockets: deregistered.
	drv.Stop()
	eventually("the stopped driver deregisters", func() bool { _, ok := registry.Preparer(upstreamPlugin); return !ok && eventCount() == 4 })
}
