package driver

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
)

const testDriver = "gpu.example.com"

// countingClient is a fake clientset that counts the writes to slices
// and can fail chosen ones. Slices it creates or updates get a new
// resourceVersion, as on the server (the fake's tracker leaves them
// empty).
type countingClient struct {
	*fake.Clientset
	mu     sync.Mutex
	rv     int
	writes map[string]int
	// fail, if set, may return an error for a write verb.
	fail func(verb string, obj runtime.Object) error
}

func newCountingClient(objects ...runtime.Object) *countingClient {
	c := &countingClient{Clientset: fake.NewSimpleClientset(objects...), writes: map[string]int{}}
	c.PrependReactor("*", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		verb := action.GetVerb()
		if verb == "list" || verb == "get" || verb == "watch" {
			return false, nil, nil
		}
		var obj runtime.Object
		if a, ok := action.(k8stesting.CreateAction); ok {
			obj = a.GetObject()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if slice, ok := obj.(*resourcev1.ResourceSlice); ok {
			c.rv++
			slice.ResourceVersion = fmt.Sprint(c.rv)
		}
		if c.fail != nil {
			if err := c.fail(verb, obj); err != nil {
				return true, nil, err
			}
		}
		c.writes[verb]++
		return false, nil, nil
	})
	return c
}

func (c *countingClient) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = map[string]int{}
	return w
}

func (c *countingClient) slices(t *testing.T) []resourcev1.ResourceSlice {
	t.Helper()
	list, err := c.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func devices(n int, model string) []resourcev1.Device {
	out := make([]resourcev1.Device, n)
	for i := range out {
		out[i] = resourcev1.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To(model)}},
		}
	}
	return out
}

func nodePool(n int, model string) Pool {
	return Pool{Name: "node-a", NodeName: "node-a", Devices: devices(n, model),
		Owner: NodeOwner(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-a"}})}
}

// checkPool checks the invariants of a published pool: one generation,
// the count equal to the number of slices, every device once.
func checkPool(t *testing.T, slices []resourcev1.ResourceSlice, wantDevices int) int64 {
	t.Helper()
	if len(slices) == 0 {
		t.Fatal("no slices")
	}
	seen := map[string]bool{}
	generation := slices[0].Spec.Pool.Generation
	for _, s := range slices {
		if s.Spec.Pool.Generation != generation {
			t.Errorf("slice %s has generation %d, another %d", s.Name, s.Spec.Pool.Generation, generation)
		}
		if s.Spec.Pool.ResourceSliceCount != int64(len(slices)) {
			t.Errorf("slice %s says the pool has %d slices, it has %d", s.Name, s.Spec.Pool.ResourceSliceCount, len(slices))
		}
		if len(s.Spec.Devices) > 128 {
			t.Errorf("slice %s has %d devices, more than the API allows", s.Name, len(s.Spec.Devices))
		}
		for _, d := range s.Spec.Devices {
			if seen[d.Name] {
				t.Errorf("device %s published twice", d.Name)
			}
			seen[d.Name] = true
		}
		if s.Spec.NodeName != nil && (len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].Name != *s.Spec.NodeName) {
			t.Errorf("node-local slice %s has owner references %v, want its Node", s.Name, s.OwnerReferences)
		}
	}
	if len(seen) != wantDevices {
		t.Errorf("%d devices published, want %d", len(seen), wantDevices)
	}
	return generation
}

func TestPublisherWrites(t *testing.T) {
	type step struct {
		pool           Pool
		wantWrites     map[string]int
		wantSlices     int
		wantGeneration int64
	}
	tests := map[string][]step{
		"unchanged pool writes nothing": {
			{pool: nodePool(8, "a"), wantWrites: map[string]int{"create": 1}, wantSlices: 1, wantGeneration: 1},
			{pool: nodePool(8, "a"), wantWrites: map[string]int{}, wantSlices: 1, wantGeneration: 1},
		},
		"split at 128 devices": {
			{pool: nodePool(300, "a"), wantWrites: map[string]int{"create": 3}, wantSlices: 3, wantGeneration: 1},
			{pool: nodePool(300, "a"), wantWrites: map[string]int{}, wantSlices: 3, wantGeneration: 1},
		},
		"grown within a slice: one update, same generation": {
			{pool: nodePool(8, "a"), wantWrites: map[string]int{"create": 1}, wantSlices: 1, wantGeneration: 1},
			{pool: nodePool(9, "a"), wantWrites: map[string]int{"update": 1}, wantSlices: 1, wantGeneration: 1},
		},
		"grown over the limit: a new slice, new generation": {
			{pool: nodePool(128, "a"), wantWrites: map[string]int{"create": 1}, wantSlices: 1, wantGeneration: 1},
			{pool: nodePool(129, "a"), wantWrites: map[string]int{"create": 1, "update": 1}, wantSlices: 2, wantGeneration: 2},
		},
		"shrunk by a slice: one delete, one update": {
			{pool: nodePool(129, "a"), wantWrites: map[string]int{"create": 2}, wantSlices: 2, wantGeneration: 1},
			{pool: nodePool(128, "a"), wantWrites: map[string]int{"update": 1, "delete": 1}, wantSlices: 1, wantGeneration: 2},
		},
		"re-attributed: every slice updated in place, new generation": {
			{pool: nodePool(200, "a"), wantWrites: map[string]int{"create": 2}, wantSlices: 2, wantGeneration: 1},
			{pool: nodePool(200, "b"), wantWrites: map[string]int{"update": 2}, wantSlices: 2, wantGeneration: 2},
		},
		"one device re-attributed: one update": {
			{pool: nodePool(200, "a"), wantWrites: map[string]int{"create": 2}, wantSlices: 2, wantGeneration: 1},
			{pool: func() Pool {
				p := nodePool(200, "a")
				p.Devices[150].Attributes["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To("b")}
				return p
			}(), wantWrites: map[string]int{"update": 1}, wantSlices: 2, wantGeneration: 1},
		},
		"tainted devices: 64 per slice": {
			{pool: func() Pool {
				p := nodePool(100, "a")
				p.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
				return p
			}(), wantWrites: map[string]int{"create": 2}, wantSlices: 2, wantGeneration: 1},
		},
		"shared counters in slices of their own, 8 sets each": {
			{pool: func() Pool {
				p := nodePool(10, "a")
				for i := range 9 {
					p.SharedCounters = append(p.SharedCounters, resourcev1.CounterSet{Name: fmt.Sprintf("set-%d", i),
						Counters: map[string]resourcev1.Counter{}})
				}
				return p
			}(), wantWrites: map[string]int{"create": 3}, wantSlices: 3, wantGeneration: 1},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := newCountingClient()
			p, err := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a"})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range steps {
				p.Update(s.pool)
				if _, err := p.Sync(ctx); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got := client.reset(); fmt.Sprint(got) != fmt.Sprint(s.wantWrites) {
					t.Errorf("step %d: writes %v, want %v", i, got, s.wantWrites)
				}
				slices := client.slices(t)
				if len(slices) != s.wantSlices {
					t.Errorf("step %d: %d slices, want %d", i, len(slices), s.wantSlices)
				}
				if g := checkPool(t, slices, len(s.pool.Devices)); g != s.wantGeneration {
					t.Errorf("step %d: generation %d, want %d", i, g, s.wantGeneration)
				}
				for _, slice := range slices {
					if len(slice.Spec.SharedCounters) > 8 || (len(slice.Spec.SharedCounters) > 0 && len(slice.Spec.Devices) > 0) {
						t.Errorf("step %d: slice %s mixes or overfills counters: %d sets, %d devices", i, slice.Name, len(slice.Spec.SharedCounters), len(slice.Spec.Devices))
					}
					for _, d := range slice.Spec.Devices {
						if len(d.Taints) > 0 && len(slice.Spec.Devices) > 64 {
							t.Errorf("step %d: slice %s has %d devices with a taint among them", i, slice.Name, len(slice.Spec.Devices))
						}
					}
				}
			}
		})
	}
}

// A restarted driver adopts the slices its earlier run published: no
// write when nothing changed, and never a second copy.
func TestPublisherAdoptsAfterRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newCountingClient()
	first, _ := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a"})
	first.Update(nodePool(300, "a"))
	if _, err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	client.reset()

	restarted, _ := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a"})
	restarted.Update(nodePool(300, "a"))
	if _, err := restarted.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := client.reset(); len(got) != 0 {
		t.Errorf("restart with the same pool wrote %v, want nothing", got)
	}
	restarted.Update(nodePool(301, "a"))
	if _, err := restarted.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	slices := client.slices(t)
	if len(slices) != 3 {
		t.Errorf("%d slices after growing within the last slice, want 3", len(slices))
	}
	checkPool(t, slices, 301)
}

// Slices of the node that belong to no desired pool (a pool the driver
// dropped while it was down) are removed; another node's are not touched.
func TestPublisherRemovesUndesiredPools(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	old := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "old"},
		Spec: resourcev1.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To("node-a"),
			Pool: resourcev1.ResourcePool{Name: "gone", Generation: 3, ResourceSliceCount: 1}},
	}
	other := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: resourcev1.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To("node-b"),
			Pool: resourcev1.ResourcePool{Name: "node-b", Generation: 1, ResourceSliceCount: 1}},
	}
	client := newCountingClient(old, other)
	p, _ := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a"})
	p.Update(nodePool(4, "a"))
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range client.slices(t) {
		names = append(names, s.Name)
	}
	want := []string{SliceNamePrefix(testDriver, "node-a") + "0", "other"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("slices %v, want %v", names, want)
	}
}

// A cluster-wide publisher (no NodeName) removes the node-less slices it
// published for a pool it no longer publishes, and leaves alone a
// node-less slice of its driver that someone else made (a network-attached
// device published by hand, or by another component of the driver).
func TestPublisherLeavesOthersNodelessSlices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	nodeless := func(name, pool string, labels map[string]string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: resourcev1.ResourceSliceSpec{Driver: testDriver, AllNodes: ptr.To(true),
				Pool: resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1}},
		}
	}
	client := newCountingClient()
	p, _ := NewPublisher(client, Options{DriverName: testDriver})
	ours := nodeless("ours", "gone", map[string]string{LabelPublishedBy: p.label()})
	theirs := nodeless("fabric", "fabric", nil)
	for _, s := range []*resourcev1.ResourceSlice{ours, theirs} {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p.Update(nodePool(4, "a"))
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range client.slices(t) {
		names = append(names, s.Name)
	}
	want := []string{"fabric", SliceNamePrefix(testDriver, "node-a") + "0"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("slices %v, want %v", names, want)
	}
}

// A conflicting write fails the pass and reports it; the next pass
// finishes the job from what it finds, without duplicates.
func TestPublisherConflict(t *testing.T) {
	tests := map[string]string{"update": "update", "create": "create"}
	for name, verb := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := newCountingClient()
			var reported []error
			p, _ := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a",
				OnError: func(_ context.Context, err error) { reported = append(reported, err) }})
			p.Update(nodePool(128, "a"))
			if _, err := p.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			failed := false
			client.fail = func(v string, obj runtime.Object) error {
				if v != verb || failed {
					return nil
				}
				failed = true
				if v == "create" {
					// Someone (an earlier run) created it first.
					slice := obj.(*resourcev1.ResourceSlice).DeepCopy()
					if err := client.Tracker().Create(schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceslices"}, slice, ""); err != nil {
						t.Fatal(err)
					}
					return apierrors.NewAlreadyExists(schema.GroupResource{Group: "resource.draplane.dev", Resource: "resourceslices"}, slice.Name)
				}
				return apierrors.NewConflict(schema.GroupResource{Group: "resource.draplane.dev", Resource: "resourceslices"}, "x", fmt.Errorf("the object has been modified"))
			}
			p.Update(nodePool(129, "b"))
			go p.Run(ctx)
			<-p.Synced()
			if !failed {
				t.Fatalf("no %s was failed", verb)
			}
			if len(reported) == 0 {
				t.Error("the conflict was not reported")
			}
			slices := client.slices(t)
			if len(slices) != 2 {
				t.Errorf("%d slices, want 2", len(slices))
			}
			checkPool(t, slices, 129)
			for _, s := range slices {
				for _, d := range s.Spec.Devices {
					if *d.Attributes["model"].StringValue != "b" {
						t.Errorf("device %s of slice %s not updated", d.Name, s.Name)
					}
				}
			}
		})
	}
}

// A cluster-wide publisher manages network-attached pools and leaves the
// node-local slices of the driver's node agents alone.
func TestPublisherNetworkAttached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	nodeLocal := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-local"},
		Spec: resourcev1.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To("node-a"),
			Pool: resourcev1.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1}},
	}
	client := newCountingClient(nodeLocal)
	p, _ := NewPublisher(client, Options{DriverName: testDriver})
	selector := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}}}}}
	p.Update(Pool{Name: "fabric", NodeSelector: selector, Devices: devices(3, "a")})
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	p.Update()
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	slices := client.slices(t)
	if len(slices) != 1 || slices[0].Name != "node-local" {
		t.Errorf("slices %v, want only the node-local one", slices)
	}
	if got := client.reset(); fmt.Sprint(got) != fmt.Sprint(map[string]int{"create": 1, "delete": 1}) {
		t.Errorf("writes %v", got)
	}
}

// A node agent that removed its slices at start publishes above the
// generation it removed, so consumers that still hold the old slices
// take the new ones as newer.
func TestPublisherMinGeneration(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := newCountingClient()
	p, _ := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a"})
	pool := nodePool(4, "a")
	pool.MinGeneration = 8
	p.Update(pool)
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if g := checkPool(t, client.slices(t), 4); g != 8 {
		t.Errorf("generation %d, want 8", g)
	}
	if _, err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := client.reset(); fmt.Sprint(got) != fmt.Sprint(map[string]int{"create": 1}) {
		t.Errorf("writes %v, want one create and nothing on the second pass", got)
	}
}

// Writes wait for the rate limiter: with a budget of one write and a
// deadline long before the next token, a pool that needs two creates gets
// one and the pass fails (the limiter refuses a wait past the deadline at
// once) instead of writing past the budget.
func TestPublisherRateLimit(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	client := newCountingClient()
	p, _ := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a", WritesPerSecond: 1e-9})
	p.Update(nodePool(129, "a"))
	if _, err := p.Sync(ctx); err == nil {
		t.Error("sync finished although the write budget was spent")
	}
	if got := client.reset(); fmt.Sprint(got) != fmt.Sprint(map[string]int{"create": 1}) {
		t.Errorf("writes %v, want the one create the budget allows", got)
	}
}

// TestPublisherWorkers: with Workers, a pass writes that many pools at
// once (every create below waits until as many are in flight, which never
// happens one at a time), and the counts and slices are those of a pass
// of one worker.
func TestPublisherWorkers(t *testing.T) {
	const workers, pools = 4, 12
	fakeClient := fake.NewSimpleClientset()
	giveUp := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(giveUp) })
	defer timer.Stop()
	client := &concurrentCreates{Interface: fakeClient, allIn: make(chan struct{}), want: workers, giveUp: giveUp}
	p, err := NewPublisher(client, Options{DriverName: testDriver, WritesPerSecond: 1000, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	var want []Pool
	for i := range pools {
		name := fmt.Sprintf("node-%d", i)
		want = append(want, Pool{Name: name, NodeName: name, Devices: devices(2, "a"),
			Owner: NodeOwner(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid"}})})
	}
	p.Update(want...)
	_, ctx := ktesting.NewTestContext(t)
	counts, err := p.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if client.maxInFlight != workers {
		t.Errorf("at most %d creates at once, want %d", client.maxInFlight, workers)
	}
	if counts != (Counts{Created: pools}) {
		t.Errorf("counts %+v, want %d created", counts, pools)
	}
	list, err := fakeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != pools {
		t.Errorf("%d slices, want %d", len(list.Items), pools)
	}
}

// concurrentCreates is a clientset whose slice creates wait until want of
// them are in flight at once (or until giveUp closes), and which counts how
// many were at most. The fake clientset runs one request at a time, so
// the waiting happens before it.
type concurrentCreates struct {
	versioned.Interface
	mu                    sync.Mutex
	inFlight, maxInFlight int
	want                  int
	allIn, giveUp         chan struct{}
	allInClosed           bool
}

func (c *concurrentCreates) ResourceV1() resourcev1client.ResourceV1Interface {
	return concurrentCreatesV1{c.Interface.ResourceV1(), c}
}

type concurrentCreatesV1 struct {
	resourcev1client.ResourceV1Interface
	c *concurrentCreates
}

func (v concurrentCreatesV1) ResourceSlices() resourcev1client.ResourceSliceInterface {
	return concurrentCreatesSlices{v.ResourceV1Interface.ResourceSlices(), v.c}
}

type concurrentCreatesSlices struct {
	resourcev1client.ResourceSliceInterface
	c *concurrentCreates
}

func (s concurrentCreatesSlices) Create(ctx context.Context, slice *resourcev1.ResourceSlice, opts metav1.CreateOptions) (*resourcev1.ResourceSlice, error) {
	c := s.c
	c.mu.Lock()
	c.inFlight++
	c.maxInFlight = max(c.maxInFlight, c.inFlight)
	if c.inFlight == c.want && !c.allInClosed {
		close(c.allIn)
		c.allInClosed = true
	}
	c.mu.Unlock()
	select {
	case <-c.allIn:
	case <-c.giveUp:
	}
	c.mu.Lock()
	c.inFlight--
	c.mu.Unlock()
	return s.ResourceSliceInterface.Create(ctx, slice, opts)
}

var slicesResource = schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceslices"}

// TestPublisherRunRepairs: a running publisher puts back what is changed
// behind its back (through the tracker, which the publisher's writes do
// not go through), with the fewest writes, and then writes nothing more:
// its own writes come back through its watch without a pass.
func TestPublisherRunRepairs(t *testing.T) {
	prefix := SliceNamePrefix(testDriver, "node-a")
	tests := []struct {
		name string
		// change changes the published slices (the tracker's copies).
		change     func(t *testing.T, client *countingClient)
		wantWrites map[string]int
		// newGeneration: the pool is published under a new generation.
		newGeneration bool
	}{
		{
			name: "a deleted slice is created again under the same generation",
			change: func(t *testing.T, client *countingClient) {
				if err := client.Tracker().Delete(slicesResource, "", prefix+"1"); err != nil {
					t.Fatal(err)
				}
			},
			wantWrites: map[string]int{"create": 1},
		},
		{
			name: "an edited device is put back",
			change: func(t *testing.T, client *countingClient) {
				edit(t, client, prefix+"2", func(s *resourcev1.ResourceSlice) {
					s.Spec.Devices[0].Attributes["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To("tampered")}
				})
			},
			wantWrites: map[string]int{"update": 1},
		},
		{
			name: "a label of someone else's is no reason to write",
			change: func(t *testing.T, client *countingClient) {
				edit(t, client, prefix+"0", func(s *resourcev1.ResourceSlice) { s.Labels["example.com/seen"] = "yes" })
			},
			wantWrites: map[string]int{},
		},
		{
			name: "a slice of another pool on the node is removed",
			change: func(t *testing.T, client *countingClient) {
				stray := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "stray", ResourceVersion: "stray-1"},
					Spec: resourcev1.ResourceSliceSpec{Driver: testDriver, NodeName: ptr.To("node-a"),
						Pool: resourcev1.ResourcePool{Name: "stray", Generation: 1, ResourceSliceCount: 1}}}
				if err := client.Tracker().Create(slicesResource, stray, ""); err != nil {
					t.Fatal(err)
				}
			},
			wantWrites: map[string]int{"delete": 1},
		},
		{
			name: "every slice deleted: back under a new generation",
			change: func(t *testing.T, client *countingClient) {
				for i := range 3 {
					if err := client.Tracker().Delete(slicesResource, "", fmt.Sprintf("%s%d", prefix, i)); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantWrites:    map[string]int{"create": 3},
			newGeneration: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			client := newCountingClient()
			p, err := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a", RepairDelay: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			pool := nodePool(300, "a")
			p.Update(pool)
			defer startRun(ctx, cancel, p)()
			<-p.Synced()
			// The echoes of the first pass's creates: no pass.
			time.Sleep(200 * time.Millisecond)
			if got := client.reset(); fmt.Sprint(got) != fmt.Sprint(map[string]int{"create": 3}) {
				t.Fatalf("first publication wrote %v, want 3 creates", got)
			}
			generation := checkPool(t, client.slices(t), 300)

			tc.change(t, client)
			deadline := time.Now().Add(5 * time.Second)
			for !repaired(client.slices(t), pool, generation, tc.newGeneration) {
				if time.Now().After(deadline) {
					t.Fatalf("not repaired within 5s: %d slices", len(client.slices(t)))
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Writes caused by its own would come within this time.
			time.Sleep(200 * time.Millisecond)
			if got := client.reset(); fmt.Sprint(got) != fmt.Sprint(tc.wantWrites) {
				t.Errorf("writes %v, want %v", got, tc.wantWrites)
			}
			checkPool(t, client.slices(t), 300)
		})
	}
}

// edit changes a slice in the tracker as someone else would, with a new
// resourceVersion.
func edit(t *testing.T, client *countingClient, name string, change func(*resourcev1.ResourceSlice)) {
	t.Helper()
	obj, err := client.Tracker().Get(slicesResource, "", name)
	if err != nil {
		t.Fatal(err)
	}
	slice := obj.(*resourcev1.ResourceSlice).DeepCopy()
	change(slice)
	slice.ResourceVersion = "edited-" + slice.ResourceVersion
	if err := client.Tracker().Update(slicesResource, slice, ""); err != nil {
		t.Fatal(err)
	}
}

// repaired says whether the slices are the pool as published: only the
// pool's slices, each device once with its model, one generation (the
// old one, or a higher one if newGeneration).
func repaired(slices []resourcev1.ResourceSlice, pool Pool, generation int64, newGeneration bool) bool {
	devices := 0
	for _, s := range slices {
		if s.Spec.Pool.Name != pool.Name || s.Spec.Pool.ResourceSliceCount != int64(len(slices)) ||
			(s.Spec.Pool.Generation > generation) != newGeneration || s.Spec.Pool.Generation < generation {
			return false
		}
		for _, d := range s.Spec.Devices {
			if *d.Attributes["model"].StringValue != "a" {
				return false
			}
			devices++
		}
	}
	return devices == len(pool.Devices)
}

// TestPublisherRunSkipsServedPass: Run does not make a pass again that a
// Sync already made for the same pools (the simulator publishes with
// Sync, then runs the publisher), and still makes every pass asked for
// later. Passes are counted by their lists of slices (the informer's
// list asks for resourceVersion 0).
func TestPublisherRunSkipsServedPass(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before is what the caller does before Run.
		before     func(ctx context.Context, t *testing.T, p *Publisher)
		wantPasses int
	}{
		{
			name: "Update, then Sync: Run's first pass is the next Update's",
			before: func(ctx context.Context, t *testing.T, p *Publisher) {
				p.Update(nodePool(3, "a"))
				if _, err := p.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			},
			wantPasses: 2,
		},
		{
			name: "Sync, then Update: the Update is not served yet",
			before: func(ctx context.Context, t *testing.T, p *Publisher) {
				if _, err := p.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				p.Update(nodePool(3, "a"))
			},
			wantPasses: 3,
		},
		{
			name:       "no Sync: Run makes the first pass",
			before:     func(ctx context.Context, t *testing.T, p *Publisher) { p.Update(nodePool(3, "a")) },
			wantPasses: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			client := newCountingClient()
			var mu sync.Mutex
			passes := 0
			client.PrependReactor("list", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if list, ok := action.(k8stesting.ListActionImpl); ok && list.ListOptions.ResourceVersion == "" {
					mu.Lock()
					passes++
					mu.Unlock()
				}
				return false, nil, nil
			})
			p, err := NewPublisher(client, Options{DriverName: testDriver, NodeName: "node-a", RepairDelay: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			tc.before(ctx, t, p)
			defer startRun(ctx, cancel, p)()
			select {
			case <-p.Synced():
			case <-time.After(time.Minute):
				t.Fatal("Run never synced")
			}
			// Passes are made one at a time, so a pass Run made for the
			// earlier requests ended before Synced: the one for this
			// Update is the last.
			p.Update(nodePool(3, "b"))
			name := SliceNamePrefix(testDriver, "node-a") + "0"
			deadline := time.Now().Add(time.Minute)
			for {
				// From the tracker: a list through the client would
				// count as a pass.
				obj, err := client.Tracker().Get(slicesResource, "", name)
				if slice, ok := obj.(*resourcev1.ResourceSlice); err == nil && ok && *slice.Spec.Devices[0].Attributes["model"].StringValue == "b" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the last Update was not published within a minute")
				}
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := passes; got != tc.wantPasses {
				t.Errorf("%d passes, want %d", got, tc.wantPasses)
			}
		})
	}
}

// startRun runs p until the returned function is called, which ends ctx
// with cancel and waits for Run to return.
func startRun(ctx context.Context, cancel context.CancelFunc, p *Publisher) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
