package grpcplugin

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
)

// recorder keeps what the Registry reported.
type recorder struct {
	mu     sync.Mutex
	events []Event
	health []HealthUpdate
}

func (r *recorder) onChange(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) onHealth(u HealthUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.health = append(r.health, u)
}

// Events lists the driver's events as "+socket" (registered) and
// "-socket" (deregistered), socket being the base name.
func (r *recorder) Events(driverName string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.DriverName != driverName {
			continue
		}
		sign := "-"
		if e.Registered {
			sign = "+"
		}
		out = append(out, sign+filepath.Base(e.SocketPath))
	}
	return out
}

func (r *recorder) Health() []HealthUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]HealthUpdate(nil), r.health...)
}

// run runs a Registry on dir until the test ends.
func run(t *testing.T, dir string) (*Registry, *recorder) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	rec := &recorder{}
	r := New(Options{Dir: dir, OnChange: rec.onChange, OnHealth: rec.onHealth, HealthRetryPeriod: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %v", waitTimeout)
		}
	})
	return r, rec
}

// newPlugin is a DRA plugin of driverName with its registration socket in
// regDir.
func newPlugin(t *testing.T, regDir, driverName string, versions ...string) *fakePlugin {
	return &fakePlugin{Type: registerapi.DRAPlugin, Name: driverName, Versions: versions,
		RegSocket: filepath.Join(regDir, driverName+"-reg.sock"), DRASocket: filepath.Join(shortDir(t), "dra.sock")}
}

func registered(r *Registry, driverName string) (Plugin, bool) {
	for _, p := range r.Plugins() {
		if p.DriverName == driverName {
			return p, true
		}
	}
	return Plugin{}, false
}

func claim(name, uid string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
}

// TestRegistration: plugins found at start and those that appear later
// register; the DRA service is the first of the plugin's list the kubelet
// knows (v1 for kubeletplugin, which lists it first), the health service
// the newest listed; calls go to the chosen version; each plugin is told
// it is registered, once.
func TestRegistration(t *testing.T) {
	dir := shortDir(t)
	cases := []struct {
		driver                 string
		versions               []string
		service, healthService string
	}{
		{"both.example.com", []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService, drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService},
			drapbv1.DRAPluginService, drahealthv1.DRAResourceHealthService},
		{"beta.example.com", []string{drapbv1beta1.DRAPluginService, drahealthv1alpha1.DRAResourceHealthService},
			drapbv1beta1.DRAPluginService, drahealthv1alpha1.DRAResourceHealthService},
		{"betafirst.example.com", []string{"v2.DRAPlugin", drapbv1beta1.DRAPluginService, drapbv1.DRAPluginService},
			drapbv1beta1.DRAPluginService, ""},
		{"v1.example.com", []string{drapbv1.DRAPluginService}, drapbv1.DRAPluginService, ""},
	}
	plugins := map[string]*fakePlugin{}
	for i, c := range cases {
		plugins[c.driver] = newPlugin(t, dir, c.driver, c.versions...)
		if i%2 == 0 { // half are there before the Registry starts
			plugins[c.driver].Start(t)
		}
	}
	r, rec := run(t, dir)
	for i, c := range cases {
		if i%2 == 1 {
			plugins[c.driver].Start(t)
		}
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.driver, func(t *testing.T) {
			f := plugins[c.driver]
			eventually(t, "registered", func() bool { _, ok := registered(r, c.driver); return ok })
			p, _ := registered(r, c.driver)
			want := Plugin{DriverName: c.driver, SocketPath: f.RegSocket, Endpoint: f.DRASocket, Service: c.service, HealthService: c.healthService}
			if p != want {
				t.Errorf("registered as\n%+v, want\n%+v", p, want)
			}
			if got := f.Statuses(); len(got) != 1 || !got[0].PluginRegistered || got[0].Error != "" {
				t.Errorf("registration statuses %v, want one that says registered", got)
			}
			// OnChange is called once the plugin is callable: a moment
			// after Plugins lists it.
			wantEvents := []string{"+" + c.driver + "-reg.sock"}
			eventually(t, "one registration event", func() bool { return len(rec.Events(c.driver)) > 0 })
			if got := rec.Events(c.driver); !slices.Equal(got, wantEvents) {
				t.Errorf("events %v, want %v", got, wantEvents)
			}
			preparer, ok := r.Preparer(c.driver)
			if !ok {
				t.Fatal("Preparer: not registered")
			}
			results, failed := driver.Prepare(ctx, preparer, []*resourcev1.ResourceClaim{claim("a", "uid-a")})
			if len(failed) > 0 || len(results) != 1 {
				t.Fatalf("prepare: %v %v", results, failed)
			}
			version := strings.TrimSuffix(c.service, ".DRAPlugin")
			if n := f.Calls(version + "/NodePrepareResources"); n != 1 {
				t.Errorf("%d calls of %s NodePrepareResources, want 1 (calls: %v)", n, version, f.calls)
			}
			if failed := driver.Unprepare(ctx, preparer, []driver.NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}, UID: "uid-a"}}); len(failed) > 0 {
				t.Fatalf("unprepare: %v", failed)
			}
			if n := f.Calls(version + "/NodeUnprepareResources"); n != 1 {
				t.Errorf("%d calls of %s NodeUnprepareResources, want 1", n, version)
			}
		})
	}
	if _, ok := r.Preparer("unknown.example.com"); ok {
		t.Error("Preparer of an unknown driver says registered")
	}
}

// TestPrepareResults: all claims go in one request (namespace, UID,
// name); devices come back per request with their CDI IDs, a claim's
// error string is that claim's error, a claim the plugin leaves out
// fails, and the others succeed; the same through v1beta1; unprepare maps
// errors per claim; a driver with no plugin fails the whole call.
func TestPrepareResults(t *testing.T) {
	for _, service := range []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService} {
		t.Run(service, func(t *testing.T) {
			dir := shortDir(t)
			const name = "gpu.example.com"
			f := newPlugin(t, dir, name, service)
			f.Prepare = func(req *drapbv1.NodePrepareResourcesRequest) *drapbv1.NodePrepareResourcesResponse {
				return &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{
					"uid-good": {Devices: []*drapbv1.Device{
						{RequestNames: []string{"gpu"}, PoolName: "node-0", DeviceName: "gpu-0", CdiDeviceIds: []string{name + "/gpu=gpu-0"}},
						{RequestNames: []string{"two", "three"}, PoolName: "node-0", DeviceName: "gpu-1", CdiDeviceIds: []string{name + "/gpu=gpu-1", "other/x=y"}},
						{PoolName: "node-0", DeviceName: "gpu-2"},
					}},
					"uid-bad": {Error: "device is on fire"},
					// uid-missing is left out.
				}}
			}
			f.Unprepare = func(req *drapbv1.NodeUnprepareResourcesRequest) *drapbv1.NodeUnprepareResourcesResponse {
				return &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{
					"uid-good": {},
					"uid-bad":  {Error: "still hot"},
				}}
			}
			f.Start(t)
			r, _ := run(t, dir)
			eventually(t, "registered", func() bool { _, ok := r.Preparer(name); return ok })
			preparer, _ := r.Preparer(name)
			ctx := context.Background()
			claims := []*resourcev1.ResourceClaim{claim("good", "uid-good"), claim("bad", "uid-bad"), claim("missing", "uid-missing")}
			results, failed := driver.Prepare(ctx, preparer, claims)

			wantRequest := []*drapbv1.Claim{{Namespace: "ns", Uid: "uid-good", Name: "good"}, {Namespace: "ns", Uid: "uid-bad", Name: "bad"}, {Namespace: "ns", Uid: "uid-missing", Name: "missing"}}
			f.mu.Lock()
			requests := f.requests
			f.mu.Unlock()
			if len(requests) != 1 || len(requests[0].Claims) != 3 {
				t.Fatalf("requests %v, want one with 3 claims", requests)
			}
			for i, c := range requests[0].Claims {
				if c.Namespace != wantRequest[i].Namespace || c.Uid != wantRequest[i].Uid || c.Name != wantRequest[i].Name {
					t.Errorf("claim %d of the request is %v, want %v", i, c, wantRequest[i])
				}
			}
			wantDevices := []driver.PreparedDevice{
				{Request: "gpu", Pool: "node-0", Device: "gpu-0", CDIDeviceIDs: []string{name + "/gpu=gpu-0"}},
				{Request: "two", Pool: "node-0", Device: "gpu-1", CDIDeviceIDs: []string{name + "/gpu=gpu-1", "other/x=y"}},
				{Request: "three", Pool: "node-0", Device: "gpu-1", CDIDeviceIDs: []string{name + "/gpu=gpu-1", "other/x=y"}},
				{Request: "", Pool: "node-0", Device: "gpu-2"},
			}
			if got := results["uid-good"]; !reflect.DeepEqual(got.Devices, wantDevices) || got.Err != nil || len(results) != 1 {
				t.Errorf("results %+v, want only uid-good with\n%+v", results, wantDevices)
			}
			if len(failed) != 2 || failed[0].Claim.Name != "bad" || failed[0].Err.Error() != "device is on fire" ||
				failed[1].Claim.Name != "missing" || !strings.Contains(failed[1].Err.Error(), "did not answer") {
				t.Errorf("failed %v, want bad (device is on fire) and missing (did not answer)", failed)
			}

			unfailed := driver.Unprepare(ctx, preparer, []driver.NamespacedObject{
				{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "good"}, UID: "uid-good"},
				{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "bad"}, UID: "uid-bad"},
			})
			if len(unfailed) != 1 || unfailed[0].Claim.Name != "bad" || unfailed[0].Err.Error() != "still hot" {
				t.Errorf("unprepare failed %v, want bad (still hot)", unfailed)
			}

			other, ok := r.Preparer("other.example.com")
			if ok {
				t.Fatal("other.example.com registered")
			}
			if _, err := other.PrepareResourceClaims(ctx, claims); err == nil || !strings.Contains(err.Error(), "DRA driver other.example.com is not registered") {
				t.Errorf("prepare without a plugin: %v", err)
			}
		})
	}
}

// TestPluginRestart: a plugin that stops (its socket goes) deregisters;
// started again it registers again on a fresh connection. A new instance
// that replaces the socket of one still running (the old process was
// killed, or is on its way out) replaces its registration: never two.
func TestPluginRestart(t *testing.T) {
	dir := shortDir(t)
	const name = "gpu.example.com"
	f := newPlugin(t, dir, name, drapbv1.DRAPluginService)
	f.Start(t)
	r, rec := run(t, dir)
	ctx := context.Background()
	prepare := func() []*driver.ClaimError {
		preparer, _ := r.Preparer(name)
		_, failed := driver.Prepare(ctx, preparer, []*resourcev1.ResourceClaim{claim("a", "uid-a")})
		return failed
	}
	const sock = name + "-reg.sock"
	eventually(t, "registered", func() bool { return len(rec.Events(name)) == 1 })
	if failed := prepare(); len(failed) > 0 {
		t.Fatal(failed)
	}

	f.Stop()
	eventually(t, "deregistered", func() bool { return len(rec.Events(name)) == 2 })
	if _, ok := r.Preparer(name); ok {
		t.Error("Preparer says registered after the socket went")
	}
	if failed := prepare(); len(failed) != 1 || !strings.Contains(failed[0].Err.Error(), "not registered") {
		t.Errorf("prepare while gone: %v", failed)
	}

	// The same plugin (same sockets) starts again.
	f.Start(t)
	eventually(t, "registered again", func() bool { return len(rec.Events(name)) == 3 })
	if failed := prepare(); len(failed) > 0 {
		t.Fatal(failed)
	}
	if n := f.Calls("v1/NodePrepareResources"); n != 2 {
		t.Errorf("%d prepare calls, want 2", n)
	}

	// A new instance removes the socket of the running one and binds its
	// own (what kubeletplugin does at start).
	g := newPlugin(t, dir, name, drapbv1.DRAPluginService)
	g.Start(t)
	eventually(t, "the new instance registers", func() bool { return len(g.Statuses()) == 1 && len(rec.Events(name)) == 5 })
	if failed := prepare(); len(failed) > 0 {
		t.Fatal(failed)
	}
	if n, m := f.Calls("v1/NodePrepareResources"), g.Calls("v1/NodePrepareResources"); n != 2 || m != 1 {
		t.Errorf("prepare calls: old instance %d (want 2), new %d (want 1)", n, m)
	}
	if got, want := rec.Events(name), []string{"+" + sock, "-" + sock, "+" + sock, "-" + sock, "+" + sock}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if got := r.Plugins(); len(got) != 1 || got[0].Endpoint != g.DRASocket {
		t.Errorf("plugins %+v, want the new instance only", got)
	}
	for _, s := range append(f.Statuses(), g.Statuses()...) {
		if !s.PluginRegistered {
			t.Errorf("status %v", s)
		}
	}
	if n := len(f.Statuses()); n != 2 {
		t.Errorf("old instance told %d times, want 2", n)
	}
}

// TestRefused: a plugin of another type and a DRA plugin with no version
// the kubelet knows are told NotifyRegistrationStatus(false) with the
// reason, and not registered; the Registry retries (as the kubelet does)
// and says the same.
func TestRefused(t *testing.T) {
	dir := shortDir(t)
	csi := newPlugin(t, dir, "csi.example.com", drapbv1.DRAPluginService)
	csi.Type = registerapi.CSIPlugin
	csi.Start(t)
	future := newPlugin(t, dir, "future.example.com", "v2.DRAPlugin")
	future.Start(t)
	r, rec := run(t, dir)
	check := func(f *fakePlugin, want string) {
		t.Helper()
		eventually(t, f.Name+" told", func() bool { return len(f.Statuses()) > 0 })
		for _, s := range f.Statuses() {
			if s.PluginRegistered || !strings.Contains(s.Error, want) {
				t.Errorf("%s told %v, want not registered with %q", f.Name, s, want)
			}
		}
	}
	check(csi, "no handler registered for plugin type: CSIPlugin at socket "+csi.RegSocket)
	check(future, `none of services supported by the plugin (["v2.DRAPlugin"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`)
	if got := r.Plugins(); len(got) != 0 {
		t.Errorf("registered %v", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.events) != 0 {
		t.Errorf("events %v", rec.events)
	}
}

// TestHealth: device health streamed by the plugin reaches OnHealth, with
// v1 and with v1alpha1 (through k8s.io/kubelet's conversion); when the
// plugin ends the stream, the Registry opens it again.
func TestHealth(t *testing.T) {
	for _, service := range []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService} {
		t.Run(service, func(t *testing.T) {
			dir := shortDir(t)
			const name = "gpu.example.com"
			f := newPlugin(t, dir, name, drapbv1.DRAPluginService, service)
			f.Health = make(chan *drahealthv1.NodeWatchResourcesResponse)
			f.Start(t)
			_, rec := run(t, dir)
			send := func(device string, health drahealthv1.HealthStatus, message string) {
				t.Helper()
				resp := &drahealthv1.NodeWatchResourcesResponse{Devices: []*drahealthv1.DeviceHealth{{
					Device: &drahealthv1.DeviceIdentifier{PoolName: "node-0", DeviceName: device},
					Health: health, LastUpdatedTime: 1_700_000_000, HealthCheckTimeoutSeconds: 60, Message: message,
				}}}
				select {
				case f.Health <- resp:
				case <-time.After(waitTimeout):
					t.Fatal("the Registry does not watch health")
				}
			}
			send("gpu-0", drahealthv1.HealthStatus_UNHEALTHY, "ECC errors")
			want := DeviceHealth{Pool: "node-0", Device: "gpu-0", Health: HealthStatusUnhealthy, Message: "ECC errors",
				LastUpdated: time.Unix(1_700_000_000, 0), HealthCheckTimeout: time.Minute}
			eventually(t, "the update arrives", func() bool { return len(rec.Health()) == 1 })
			if got := rec.Health()[0]; got.DriverName != name || len(got.Devices) != 1 || got.Devices[0] != want {
				t.Errorf("update %+v, want %+v", got, want)
			}

			// The plugin ends the stream; the Registry opens it again.
			f.Health <- nil
			eventually(t, "stream opened again", func() bool { return f.Streams() == 2 })
			send("gpu-0", drahealthv1.HealthStatus_HEALTHY, "")
			eventually(t, "the next update arrives", func() bool { return len(rec.Health()) == 2 })
			if got := rec.Health()[1].Devices[0].Health; got != HealthStatusHealthy {
				t.Errorf("health %s, want Healthy", got)
			}
		})
	}
}

// TestDirectoryLayout: sockets in subdirectories (made after the Registry
// started) register, names starting with "." and files that are not
// sockets do not, as in the kubelet's plugin watcher.
func TestDirectoryLayout(t *testing.T) {
	dir := shortDir(t)
	r, _ := run(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "not-a-socket.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	hidden := newPlugin(t, dir, "hidden.example.com", drapbv1.DRAPluginService)
	hidden.RegSocket = filepath.Join(dir, ".hidden-reg.sock")
	hidden.Start(t)
	sub := newPlugin(t, dir, "sub.example.com", drapbv1.DRAPluginService)
	sub.RegSocket = filepath.Join(dir, "sub", "dir", "sub-reg.sock")
	sub.Start(t)
	eventually(t, "the plugin in a subdirectory registers", func() bool { _, ok := registered(r, "sub.example.com"); return ok })
	if got := r.Plugins(); len(got) != 1 {
		t.Errorf("plugins %+v, want sub.example.com only", got)
	}
	if got := hidden.Statuses(); len(got) != 0 {
		t.Errorf("the hidden plugin was told %v", got)
	}
}
