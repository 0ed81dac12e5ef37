package devicemap

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

const driver = "gpu.example.com"

func slice(node string, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			NodeName: ptr.To(node), Devices: devices},
	}
}

func claim(name string, pods []string, results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p})
	}
	return c
}

func result(pool, device string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: pool, Device: device}
}

func TestStates(t *testing.T) {
	partition := func(name string) resourcev1.Device {
		return resourcev1.Device{Name: name, ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "mem"}}}
	}
	admin := result("n", "d")
	admin.AdminAccess = ptr.To(true)
	share := result("n", "d")
	share.ShareID = ptr.To(types.UID("s1"))
	for name, tc := range map[string]struct {
		devices []resourcev1.Device
		claims  []*resourcev1.ResourceClaim
		rules   []*resourcev1.DeviceTaintRule
		want    map[string]string // device -> state
	}{
		"free": {devices: []resourcev1.Device{{Name: "d"}}, want: map[string]string{"d": StateFree}},
		"allocated": {devices: []resourcev1.Device{{Name: "d"}}, claims: []*resourcev1.ResourceClaim{claim("c", []string{"p"}, result("n", "d"))},
			want: map[string]string{"d": StateAllocated}},
		"admin access": {devices: []resourcev1.Device{{Name: "d"}}, claims: []*resourcev1.ResourceClaim{claim("c", nil, admin)},
			want: map[string]string{"d": StateAdminAccess}},
		"shared": {devices: []resourcev1.Device{{Name: "d", AllowMultipleAllocations: ptr.To(true)}}, claims: []*resourcev1.ResourceClaim{claim("c", nil, share)},
			want: map[string]string{"d": StateShared}},
		"partition in use": {devices: []resourcev1.Device{partition("d"), partition("e")}, claims: []*resourcev1.ResourceClaim{claim("c", nil, result("n", "d"))},
			want: map[string]string{"d": StateAllocated, "e": StatePartition}},
		"slice taint": {devices: []resourcev1.Device{{Name: "d", Taints: []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoExecute}}}},
			want: map[string]string{"d": StateNoExecute}},
		"rule taint wins over allocation": {devices: []resourcev1.Device{{Name: "d"}, {Name: "e"}},
			claims: []*resourcev1.ResourceClaim{claim("c", nil, result("n", "d"))},
			rules: []*resourcev1.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: resourcev1.DeviceTaintRuleSpec{
				DeviceSelector: &resourcev1.DeviceTaintSelector{Device: ptr.To("d")}, Taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}},
			want: map[string]string{"d": StateNoSchedule, "e": StateFree}},
	} {
		t.Run(name, func(t *testing.T) {
			m := New(nil)
			m.manual = true
			m.SetSlice(slice("n", tc.devices...))
			for _, c := range tc.claims {
				m.SetClaim(c)
			}
			for _, r := range tc.rules {
				m.SetRule(r)
			}
			m.Flush()
			var row Row
			if err := json.Unmarshal(m.rows["n"], &row); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, d := range row.Devices {
				got[d.Name] = d.State
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("states %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEvents reads the stream as a page does: the snapshot, then an
// update with only the node that changed, and the pending pods.
func TestEvents(t *testing.T) {
	m := New(nil)
	m.manual = true
	m.SetSlice(slice("a", resourcev1.Device{Name: "d"}))
	m.SetSlice(slice("b", resourcev1.Device{Name: "d"}))
	m.Flush()
	stop := make(chan struct{})
	defer close(stop)
	srv := httptest.NewServer(m.Handler(stop))
	defer srv.Close()
	resp, err := http.Get(srv.URL + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	next := func() message {
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				var msg message
				if err := json.Unmarshal([]byte(data), &msg); err != nil {
					t.Fatal(err)
				}
				return msg
			}
		}
		t.Fatalf("stream ended: %v", lines.Err())
		return message{}
	}
	if msg := next(); msg.Type != "snapshot" || len(msg.Nodes) != 2 {
		t.Fatalf("first event %s with %d nodes, want a snapshot of 2", msg.Type, len(msg.Nodes))
	}
	m.SetClaim(claim("c", []string{"p"}, result("b", "d")))
	m.SetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waits"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "no devices"}}}})
	m.Flush()
	msg := next()
	if msg.Type != "update" || len(msg.Nodes) != 1 || !strings.Contains(string(msg.Nodes[0]), `"node":"b"`) || !strings.Contains(string(msg.Nodes[0]), `"allocated"`) {
		t.Errorf("update %s, want node b alone with an allocated device", mustJSON(msg))
	}
	if !strings.Contains(string(msg.Pending), `"pod":"ns/waits","reason":"Unschedulable"`) {
		t.Errorf("pending %s, want ns/waits Unschedulable", msg.Pending)
	}
	// Writes are refused: the page is read-only.
	post, err := http.Post(srv.URL+EventsPath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", post.StatusCode)
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// BenchmarkUpdate is the server's CPU for one update at 500 nodes × 8
// devices with one page connected: a claim allocated on one node, the
// node's row recomputed and encoded, and the update sent.
func BenchmarkUpdate(b *testing.B) {
	m := New(nil)
	m.manual = true
	const nodes, devices = 500, 8
	for n := range nodes {
		var ds []resourcev1.Device
		for d := range devices {
			ds = append(ds, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		m.SetSlice(slice(fmt.Sprintf("node-%d", n), ds...))
	}
	m.Flush()
	s := &subscriber{ch: make(chan []byte, 1)}
	m.subscribers[s] = struct{}{}
	var bytes int
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		node := fmt.Sprintf("node-%d", i%nodes)
		m.SetClaim(claim("c", []string{"p"}, result(node, "gpu-0")))
		m.Flush()
		bytes = len(<-s.ch)
	}
	b.ReportMetric(float64(bytes), "bytes/update")
}

// BenchmarkSnapshot is the first event a page gets at 500 nodes × 8
// devices.
func BenchmarkSnapshot(b *testing.B) {
	m := New(nil)
	m.manual = true
	for n := range 500 {
		var ds []resourcev1.Device
		for d := range 8 {
			ds = append(ds, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		m.SetSlice(slice(fmt.Sprintf("node-%d", n), ds...))
	}
	m.Flush()
	var size int
	b.ReportAllocs()
	for b.Loop() {
		m.mu.Lock()
		size = len(m.snapshotLocked())
		m.mu.Unlock()
	}
	b.ReportMetric(float64(size), "bytes")
}

// TestRuleRedrawsItsPools: a DeviceTaintRule for one pool redraws that
// pool's node only, a rule for every pool all of them, and deleting a
// rule redraws what it picked.
func TestRuleRedrawsItsPools(t *testing.T) {
	m := New(nil)
	m.manual = true
	for _, node := range []string{"a", "b", "c"} {
		m.SetSlice(slice(node, resourcev1.Device{Name: "d"}))
	}
	m.Flush()
	s := &subscriber{ch: make(chan []byte, 4)}
	m.subscribers[s] = struct{}{}
	redrawn := func() int {
		m.Flush()
		var msg message
		if err := json.Unmarshal(<-s.ch, &msg); err != nil {
			t.Fatal(err)
		}
		return len(msg.Nodes)
	}
	rule := func(pool *string) *resourcev1.DeviceTaintRule {
		return &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Pool: pool}, Taint: resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}
	}
	m.SetRule(rule(ptr.To("b")))
	if n := redrawn(); n != 1 {
		t.Errorf("a rule for pool b redrew %d nodes, want 1", n)
	}
	m.SetRule(rule(nil))
	if n := redrawn(); n != 3 {
		t.Errorf("a rule for every pool redrew %d nodes, want 3", n)
	}
	m.SetRule(rule(ptr.To("c")))
	if n := redrawn(); n != 3 {
		t.Errorf("narrowing the rule to pool c redrew %d nodes, want 3 (its old selector picked all)", n)
	}
	m.DeleteRule("r")
	if n := redrawn(); n != 1 {
		t.Errorf("deleting the rule for pool c redrew %d nodes, want 1", n)
	}
}

// TestSnapshotIsJSON: the hand-written snapshot decodes as the message
// json.Marshal would write.
func TestSnapshotIsJSON(t *testing.T) {
	m := New(nil)
	m.manual = true
	m.SetSlice(slice("a", resourcev1.Device{Name: "d"}))
	m.SetSlice(slice("b", resourcev1.Device{Name: "d"}))
	m.SetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "waits"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}})
	m.Flush()
	m.mu.Lock()
	data := m.snapshotLocked()
	m.mu.Unlock()
	var msg message
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	if msg.Type != "snapshot" || len(msg.Nodes) != 2 || !strings.Contains(string(msg.Pending), "ns/waits") || string(msg.Classes) != "[]" {
		t.Errorf("snapshot %s", data)
	}
}
