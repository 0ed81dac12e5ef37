package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

const (
	repairDriver = "repair.example.com"
	repairNode   = "repair-node-0"
	// repairDeadline is how soon a slice changed behind the publisher's
	// back must be as the publisher wants it again.
	repairDeadline = 5 * time.Second
	// quietPeriod is how long the publisher must write nothing more after
	// a repair: its own writes come back to it through its watch.
	quietPeriod = 3 * time.Second
)

// writeCounter counts the requests that write ResourceSlices, by method.
type writeCounter struct {
	mu     sync.Mutex
	writes map[string]int
}

func (c *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/resourceslices") {
			c.mu.Lock()
			c.writes[req.Method]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// take returns the writes counted since the last take.
func (c *writeCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = map[string]int{}
	return w
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestPublisherRepairs runs a driver.Publisher in the test process, as
// the node's identity, against the real server, with a pool of 300
// devices (three slices), and changes its slices behind its back with
// kubectl: a deleted slice is created again, a device edited in a slice is
// put back, each within repairDeadline and with that one write; a label
// added by someone else is no reason to write; deleting every slice brings
// the pool back under a higher generation. After each repair the publisher
// stays quiet: its own writes do not make it write again.
func TestPublisherRepairs(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--simulate-nodes=0")
	kubeconfig := mintKubeconfig(t, s, "draplane:node:"+repairNode, "draplane:nodes", "draplane:driver:"+repairDriver)
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	counter := &writeCounter{writes: map[string]int{}}
	config.Wrap(counter.wrap)
	client, err := versioned.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	publisher, err := driver.NewPublisher(client, driver.Options{DriverName: repairDriver, NodeName: repairNode})
	if err != nil {
		t.Fatal(err)
	}
	devices := make([]resourcev1.Device, 300)
	for i := range devices {
		devices[i] = resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("a100")}}}
	}
	publisher.Update(driver.Pool{Name: repairNode, NodeName: repairNode, Devices: devices})
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		publisher.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-publisher.Synced():
	case <-time.After(pollTimeout):
		t.Fatal("the publisher did not publish")
	}

	admin := s.Client(t).ResourceV1().ResourceSlices()
	list := func() []resourcev1.ResourceSlice {
		t.Helper()
		l, err := admin.List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", repairNode).String()})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	// complete: three slices of one generation that say so, every device
	// once with its model. It returns the generation.
	complete := func() (int64, bool) {
		items := list()
		if len(items) != 3 {
			return 0, false
		}
		seen := map[string]bool{}
		for _, slice := range items {
			if slice.Spec.Pool.Generation != items[0].Spec.Pool.Generation || slice.Spec.Pool.ResourceSliceCount != 3 {
				return 0, false
			}
			for _, d := range slice.Spec.Devices {
				if ptr.Deref(d.Attributes["model"].StringValue, "") != "a100" || seen[d.Name] {
					return 0, false
				}
				seen[d.Name] = true
			}
		}
		return items[0].Spec.Pool.Generation, len(seen) == len(devices)
	}
	within := func(what string, deadline time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > deadline {
				t.Fatalf("%s: not within %v; slices now:\n%s", what, deadline,
					s.MustKubectl(t, "", "get", "resourceslices", "--field-selector", "spec.nodeName="+repairNode,
						"-o", `jsonpath={range .items[*]}{.metadata.name}{" generation="}{.spec.pool.generation}{" count="}{.spec.pool.resourceSliceCount}{" devices="}{.spec.devices[0].name}{".."}{.spec.devices[-1:].name}{"\n"}{end}`))
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}
	expectWrites := func(what string, want map[string]int) {
		t.Helper()
		// Writes that follow a repair (a loop on its own writes) would
		// come within this time.
		time.Sleep(quietPeriod)
		if got := counter.take(); !maps.Equal(got, want) {
			t.Errorf("%s: the publisher wrote %v, want %v", what, got, want)
		}
	}

	generation, ok := complete()
	if !ok {
		t.Fatal("the published pool is not complete")
	}
	expectWrites("first publication", map[string]int{http.MethodPost: 3})
	names := make([]string, 0, 3)
	for _, slice := range list() {
		names = append(names, slice.Name)
	}

	tests := []struct {
		name string
		// change is the kubectl command that changes the slices.
		change []string
		// wantWrites are the fewest writes that undo the change.
		wantWrites map[string]int
		// newGeneration: the repair needs a new generation of the pool.
		newGeneration bool
	}{
		{
			name:       "a deleted slice is created again",
			change:     []string{"delete", "resourceslice", names[1]},
			wantWrites: map[string]int{http.MethodPost: 1},
		},
		{
			name: "an edited device is put back",
			change: []string{"patch", "resourceslice", names[2], "--type=json",
				"-p", `[{"op":"replace","path":"/spec/devices/0/attributes/model/string","value":"tampered"}]`},
			wantWrites: map[string]int{http.MethodPut: 1},
		},
		{
			name:       "a label of someone else's is no reason to write",
			change:     []string{"label", "resourceslice", names[0], "example.com/seen-by=test"},
			wantWrites: map[string]int{},
		},
		{
			name:          "every slice deleted: the pool comes back under a new generation",
			change:        []string{"delete", "resourceslices", "--field-selector", "spec.nodeName=" + repairNode},
			wantWrites:    map[string]int{http.MethodPost: 3},
			newGeneration: true,
		},
	}
	for _, tc := range tests {
		s.MustKubectl(t, "", tc.change...)
		took := within(tc.name, repairDeadline, func() bool {
			g, ok := complete()
			return ok && (g == generation) != tc.newGeneration
		})
		t.Logf("%s: complete again after %v", tc.name, took.Round(10*time.Millisecond))
		expectWrites(tc.name, tc.wantWrites)
		generation, _ = complete()
	}
}
