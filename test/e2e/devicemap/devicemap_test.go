// Package devicemap drives the device map page of the real binary in
// headless Chromium (Debian's package, installed by the test when
// missing), through `kubectl proxy` with the admin kubeconfig, as a user
// opens it.
package devicemap

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/draplane/draplane/internal/testing/skipnote"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/launcher"
)

const chromiumPath = "/usr/bin/chromium"

var update = flag.Bool("update", false, "copy the screenshot to docs/devicemap.png for docs/operators.md")

func TestMain(m *testing.M) {
	if os.Getenv("DRAPLANE_DEVICEMAP") != "1" {
		skipnote.Print("test/e2e/devicemap", "the device map in headless Chromium installs Debian's chromium; run it with DRAPLANE_DEVICEMAP=1 (make test-devicemap)")
	}
	os.Exit(m.Run())
}

// env is a running server, kubectl proxy in front of it and Chromium.
type env struct {
	server   *launcher.Server
	kubectl  string
	proxyURL string
	browser  context.Context
}

func setUp(t *testing.T, nodes int) *env {
	if os.Getenv("DRAPLANE_DEVICEMAP") != "1" {
		t.Skip("set DRAPLANE_DEVICEMAP=1 (make test-devicemap): installs Debian's chromium and drives the page in it")
	}
	ensureChromium(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "dra-apiserver")
	if err := launcher.Build("./cmd/dra-apiserver", binary); err != nil {
		t.Fatal(err)
	}
	s := launcher.NewServer("dra-apiserver", binary, filepath.Join(dir, "data"), 0,
		fmt.Sprintf("--simulate-nodes=%d", nodes), "--embedded-etcd-unsafe-no-fsync")
	if err := s.Start(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if !strings.Contains(s.Output(), "draplane: device map at "+s.URL+"/devicemap/") {
		t.Errorf("the server does not print the device map's URL:\n%s", launcher.Tail(s.Output(), 20))
	}
	// The page is behind the API's authentication: an anonymous request
	// is refused.
	anonymous, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := anonymous.Get(s.URL + "/devicemap/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous GET /devicemap/: %d, want 401 or 403", resp.StatusCode)
	}
	e := &env{server: s, kubectl: kubectl}
	e.proxyURL = e.startProxy(t)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium")),
		chromedp.WindowSize(1400, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	e.browser = browser
	return e
}

// ensureChromium installs Debian's chromium when it is missing.
func ensureChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err == nil {
		return
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		t.Skipf("no %s and no apt-get to install Debian's chromium with", chromiumPath)
	}
	for _, args := range [][]string{{"update"}, {"install", "-y", "chromium"}} {
		cmd := exec.Command(apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, launcher.Tail(string(out), 20))
		}
	}
}

// startProxy runs `kubectl proxy` on a free port with the admin
// kubeconfig and returns its URL.
func (e *env) startProxy(t *testing.T) string {
	cmd := exec.Command(e.kubectl, "--kubeconfig", e.server.Kubeconfig, "proxy", "--port=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("kubectl proxy: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "Starting to serve on ")
	if !ok {
		t.Fatalf("kubectl proxy said %q", line)
	}
	return "http://" + addr
}

func (e *env) mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(e.kubectl, append([]string{"--kubeconfig", e.server.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const workload = `
apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: gpu.sim.draplane.dev
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.sim.draplane.dev"
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
          deviceClassName: gpu.sim.draplane.dev
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: two-gpus
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.sim.draplane.dev
          count: 2
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: sixteen-gpus
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: gpu.sim.draplane.dev
          count: 16
`

func pod(name, template string) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: c
    image: busybox
    resources:
      claims:
      - name: gpu
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: %s
`, name, template)
}

// counts are the devices the page shows per state (data-state of each
// .dev cell).
const countsJS = `(() => {
  const n = {};
  document.querySelectorAll('#grid .dev').forEach(c => { const s = c.getAttribute('data-state'); n[s] = (n[s] || 0) + 1; });
  return n;
})()`

func TestDeviceMap(t *testing.T) {
	e := setUp(t, 4)
	// Three pods placed, two with one GPU and one with two, and one that
	// asks for more GPUs than a node has.
	e.mustKubectl(t, workload+pod("one-a", "one-gpu")+pod("one-b", "one-gpu")+pod("two", "two-gpus")+
		pod("too-big", "sixteen-gpus"), "apply", "-f", "-")
	e.mustKubectl(t, "", "wait", "--for=condition=Ready", "pod/one-a", "pod/one-b", "pod/two", "--timeout=60s")

	out := filepath.Join(testenv.RepoRoot(), "_output", "devicemap")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.browser, 2*time.Minute)
	defer cancel()
	start := time.Now()
	do(t, ctx, chromedp.Navigate(e.proxyURL+"/devicemap/"))
	do(t, ctx, chromedp.WaitVisible(`body[data-ready="1"]`))
	t.Logf("page loaded with its snapshot in %v", time.Since(start).Round(time.Millisecond))

	want := map[string]int{"free": 28, "allocated": 4}
	counts := e.waitCounts(t, ctx, want, time.Minute)
	t.Logf("devices per state: %v", counts)
	// The pending pod's reason and the class totals are shown.
	pendingText := do(t, ctx, chromedp.Text(`#pending`))
	classText := do(t, ctx, chromedp.Text(`#classes`))
	if !strings.Contains(pendingText, "default/too-big") {
		t.Errorf("pending pods do not list default/too-big:\n%s", pendingText)
	}
	if !strings.Contains(classText, "gpu.sim.draplane.dev") {
		t.Errorf("class totals do not list gpu.sim.draplane.dev:\n%s", classText)
	}

	// Taint one free device; the page changes without a reload: the
	// marker set on the window survives.
	free := do(t, ctx, chromedp.Evaluate[string](`window.__noReload = "kept"; document.querySelector('#grid .dev[data-state="free"]').getAttribute('data-id')`))
	parts := strings.Split(free, "/")
	rule := fmt.Sprintf(`apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: broken-gpu
spec:
  deviceSelector:
    driver: %s
    pool: %s
    device: %s
  taint:
    key: example.com/broken
    value: "true"
    effect: NoSchedule
`, parts[0], parts[1], parts[2])
	e.mustKubectl(t, rule, "apply", "-f", "-")
	tainted := time.Now()
	want = map[string]int{"free": 27, "allocated": 4, "tainted-noschedule": 1}
	e.waitCounts(t, ctx, want, 2*time.Second)
	t.Logf("the taint showed %v after kubectl apply returned", time.Since(tainted).Round(time.Millisecond))
	marker := do(t, ctx, chromedp.Evaluate[string](`window.__noReload || "reloaded"`))
	state := do(t, ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('#grid .dev[data-id=%q]').getAttribute('data-state')`, free)))
	// A click on an allocated device shows its claim and pod.
	do(t, ctx, chromedp.Click(`#grid .dev[data-state="allocated"]`))
	if text := do(t, ctx, chromedp.Text(`#details`)); !strings.Contains(text, "default/one-") && !strings.Contains(text, "default/two") {
		t.Errorf("the details of an allocated device name none of the pods:\n%s", text)
	}
	shot := do(t, ctx, chromedp.FullScreenshot(100))
	if marker != "kept" {
		t.Errorf("the page was reloaded")
	}
	if state != "tainted-noschedule" {
		t.Errorf("device %s shows %q, want tainted-noschedule", free, state)
	}
	path := filepath.Join(out, "screenshot.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if *update {
		if err := os.WriteFile(filepath.Join(testenv.RepoRoot(), "docs", "devicemap.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCounts polls the page's counts until they are want (states not in
// want: zero), and fails after within.
func (e *env) waitCounts(t *testing.T, ctx context.Context, want map[string]int, within time.Duration) map[string]int {
	t.Helper()
	deadline := time.Now().Add(within)
	var got map[string]int
	for {
		got = do(t, ctx, chromedp.Evaluate[map[string]int](countsJS))
		if equal(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("devices per state %v, want %v within %v", got, want, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// do runs one action in the browser.
func do[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func equal(got, want map[string]int) bool {
	for k, v := range got {
		if want[k] != v {
			return false
		}
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// TestDeviceMapScale measures the page at 500 simulated nodes × 8 GPUs
// (DRAPLANE_DEVICEMAP_SCALE=1): how long the page takes to load and show
// its snapshot, and the server's CPU per update while a DeviceTaintRule
// for one pool is applied and deleted. It logs numbers; it asserts none
// of them.
func TestDeviceMapScale(t *testing.T) {
	if os.Getenv("DRAPLANE_DEVICEMAP_SCALE") != "1" {
		t.Skip("set DRAPLANE_DEVICEMAP_SCALE=1 to measure the page at 500 simulated nodes")
	}
	const nodes = 500
	e := setUp(t, nodes)
	ctx, cancel := context.WithTimeout(e.browser, 5*time.Minute)
	defer cancel()
	// Wait until every node's slice is shown once, then load the page
	// again for the measurement.
	do(t, ctx, chromedp.Navigate(e.proxyURL+"/devicemap/"))
	e.waitCounts(t, ctx, map[string]int{"free": nodes * 8}, 3*time.Minute)
	start := time.Now()
	do(t, ctx, chromedp.Navigate(e.proxyURL+"/devicemap/"))
	do(t, ctx, chromedp.WaitVisible(`body[data-ready="1"]`))
	load := time.Since(start)
	domLoad := do(t, ctx, chromedp.Evaluate[float64](`performance.now()`))
	t.Logf("page at %d nodes × 8 devices: navigation to snapshot shown in %v (page's own clock: %.0f ms)", nodes, load.Round(time.Millisecond), domLoad)

	const rounds = 20
	updatesBefore := e.updates(t)
	cpuBefore := processCPU(t, e.server.Pid())
	begin := time.Now()
	rule := `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: scale
spec:
  deviceSelector:
    device: gpu-0
    pool: sim-node-0
  taint:
    key: example.com/scale
    effect: NoSchedule
`
	for range rounds {
		e.mustKubectl(t, rule, "apply", "-f", "-")
		e.waitCounts(t, ctx, map[string]int{"free": nodes*8 - 1, "tainted-noschedule": 1}, time.Minute)
		e.mustKubectl(t, "", "delete", "devicetaintrule", "scale")
		e.waitCounts(t, ctx, map[string]int{"free": nodes * 8}, time.Minute)
	}
	elapsed := time.Since(begin)
	cpu := processCPU(t, e.server.Pid()) - cpuBefore
	updates := e.updates(t) - updatesBefore
	t.Logf("%d rule changes in %v: %d updates, server CPU %v in all, %v per update (includes the API requests and the other watchers of the rules)",
		2*rounds, elapsed.Round(time.Millisecond), updates, cpu.Round(time.Millisecond), (cpu / time.Duration(max(updates, 1))).Round(time.Microsecond))
}

// updates is the server's draplane_devicemap_updates_total.
func (e *env) updates(t *testing.T) int {
	for _, line := range strings.Split(e.mustKubectl(t, "", "get", "--raw", "/metrics"), "\n") {
		if v, ok := strings.CutPrefix(line, "draplane_devicemap_updates_total "); ok {
			var n float64
			fmt.Sscan(v, &n)
			return int(n)
		}
	}
	t.Fatal("no draplane_devicemap_updates_total in /metrics")
	return 0
}

// processCPU is the user and system CPU time of a process so far.
func processCPU(t *testing.T, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	var utime, stime int64
	fmt.Sscan(fields[11], &utime)
	fmt.Sscan(fields[12], &stime)
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks
}
