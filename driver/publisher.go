// Package driver is the library a DRA driver imports to work with
// draplane: a Publisher that keeps the driver's ResourceSlices equal to the
// pools it states, the node agent's clean start (RemoveNodeSlices), and
// the interface through which a node agent prepares and unprepares the
// claims of a pod (Preparer).
package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/generated/clientset/versioned/scheme"
	"github.com/draplane/draplane/internal/codec"
	"github.com/draplane/draplane/internal/reflectequal"
)

// LabelPublishedBy marks the slices a Publisher writes; its value is a
// hash of the driver name (driver names may be longer than a label value).
const LabelPublishedBy = "driver.draplane.dev/published-by"

// Pool is one pool a driver offers. Exactly one of NodeName, NodeSelector
// and AllNodes says where its devices are usable.
type Pool struct {
	// Name is the pool's name, unique per driver.
	Name string
	// NodeName makes the pool node-local.
	NodeName string
	// NodeSelector makes the pool network-attached to the nodes it
	// selects (one term).
	NodeSelector *corev1.NodeSelector
	// AllNodes makes the pool usable from every node.
	AllNodes bool
	// Devices of the pool, in the order the driver wants them published.
	Devices []resourcev1.Device
	// SharedCounters of the pool; they are published in slices of their
	// own, as the API requires.
	SharedCounters []resourcev1.CounterSet
	// SkipNodeOperations of every slice of the pool: the node-local calls
	// (NodePrepareResources, NodeUnprepareResources, "*") the driver does
	// not need for its devices. Needs the DRAOptionalNodeOperations gate
	// of the API server.
	SkipNodeOperations []resourcev1.SkipNodeOperation
	// MinGeneration is the lowest generation the pool is published
	// with. A node agent that removed the pool's slices at start passes
	// one more than the highest generation it removed, so that consumers
	// still holding the old slices take the new ones as newer.
	MinGeneration int64
	// Owner, if set, becomes the owner reference of every slice of the
	// pool. Node-local pools should be owned by their Node (NodeOwner), so
	// that the slices go with it.
	Owner *metav1.OwnerReference
}

// NodeOwner is the owner reference a node-local pool's slices carry.
func NodeOwner(node *corev1.Node) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}

// Options configure a Publisher.
type Options struct {
	// NodeClient, if set, is the client of a node's own identity, which
	// writes the slices of that node (a publisher for many nodes writes
	// each node's slices as that node). Nil, and for slices of no node:
	// the publisher's client.
	NodeClient func(nodeName string) versioned.Interface
	// DriverName is the driver's name (spec.driver of every slice).
	DriverName string
	// NodeName scopes a node agent's publisher to the slices of one node:
	// slices of other nodes are never touched. Empty for a cluster-wide
	// publisher, which manages the driver's slices without a node name.
	NodeName string
	// WritesPerSecond bounds the publisher's API writes; 0 means 10/s with
	// bursts of 50.
	WritesPerSecond float64
	// Workers is how many pools a pass writes at once (within
	// WritesPerSecond); 0 means one. A publisher of many pools waits for
	// one write at a time otherwise.
	Workers int
	// SliceName, if set, names the slice at a position of a pool (from
	// 0); names must stay the same for the same pool and position.
	// Nil: SliceNamePrefix followed by the position.
	SliceName func(poolName string, index int) string
	// OnError is told about every failed sync (which is retried with
	// backoff). Nil logs the error.
	OnError func(ctx context.Context, err error)
	// SliceInformer, if set, is a shared informer of ResourceSlices that
	// sees at least the slices the publisher manages; its owner starts
	// it. Nil: Run watches the driver's slices (of NodeName, if set)
	// with an informer of its own.
	SliceInformer cache.SharedIndexInformer
	// RepairDelay is how long after a change by someone else to one of
	// its slices Run looks at the slices again (changes that come within
	// it are repaired in one pass); 0 means DefaultRepairDelay. Repairs
	// that follow each other closely (someone keeps changing the slices)
	// wait twice as long each time, up to MaxRepairDelay.
	RepairDelay time.Duration
	// ResyncPeriod is how often Run makes a pass without being asked;
	// 0 means DefaultResyncPeriod, negative never.
	ResyncPeriod time.Duration
}

const (
	// DefaultRepairDelay: changes that come together (kubectl deleting
	// several slices) are repaired in one pass, and still soon.
	DefaultRepairDelay = 500 * time.Millisecond
	// MaxRepairDelay bounds the backoff of repairs against someone who
	// keeps changing the slices.
	MaxRepairDelay = time.Minute
	// DefaultResyncPeriod is a last resort: the watch tells of every
	// change, a resync finds what no event told of.
	DefaultResyncPeriod = 10 * time.Minute
)

// Publisher creates, updates and deletes the driver's ResourceSlices so
// that they describe the pools it was given last. Call Update with the
// desired pools and Run to let it work in the background, or Sync to make
// one pass in the caller's goroutine. Run also watches the slices and
// repairs what someone else deleted or changed (repair.go).
type Publisher struct {
	client   versioned.Interface
	opts     Options
	limiter  *rate.Limiter
	queue    workqueue.TypedRateLimitingInterface[string]
	informer cache.SharedIndexInformer
	// ownInformer: Run starts the informer (it is not a shared one).
	ownInformer bool

	mu    sync.Mutex
	pools map[string]Pool
	// known are the resourceVersions of the managed slices as the last
	// pass left them, by name: an event that shows another one is
	// someone else's change.
	known map[string]string
	// changed are the names events showed changes of since the last
	// check.
	changed map[string]bool
	// generations are the last generation each pool was published with:
	// a pool whose slices were all deleted comes back above it.
	generations map[string]int64
	// repairs counts the repairs that wrote in a row, lastRepair is
	// when the last one did: the next repair waits longer.
	repairs    int
	lastRepair time.Time
	// synced is closed once Run has a pass that succeeded (Synced).
	synced     chan struct{}
	syncedOnce sync.Once
	// requests counts the passes asked for, the first one (a new
	// publisher's) included; served is what requests was when the last
	// pass that succeeded started. Run skips a queued pass that one
	// already served, such as the pass Update asks for when the caller
	// then made it with Sync.
	requests, served uint64
}

// Counts say how many writes one pass made.
type Counts struct {
	Created, Updated, Deleted int
}

// Writes is the number of API writes.
func (c Counts) Writes() int { return c.Created + c.Updated + c.Deleted }

// NewPublisher returns a publisher with no pools: a Sync before Update
// removes every slice it manages.
func NewPublisher(client versioned.Interface, opts Options) (*Publisher, error) {
	if opts.DriverName == "" {
		return nil, errors.New("publisher needs a driver name")
	}
	limit, burst := rate.Limit(10), 50
	if opts.WritesPerSecond > 0 {
		limit, burst = rate.Limit(opts.WritesPerSecond), max(1, int(opts.WritesPerSecond))
	}
	if opts.RepairDelay <= 0 {
		opts.RepairDelay = DefaultRepairDelay
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	p := &Publisher{
		client:  client,
		opts:    opts,
		limiter: rate.NewLimiter(limit, burst),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "publisher"},
		),
		pools:       map[string]Pool{},
		known:       map[string]string{},
		changed:     map[string]bool{},
		generations: map[string]int64{},
		synced:      make(chan struct{}),
		requests:    1,
	}
	if err := p.watch(); err != nil {
		return nil, err
	}
	return p, nil
}

// Update replaces the desired pools and asks Run for a pass. The pools are
// the publisher's from then on, as they are: pass new ones rather than
// change these.
func (p *Publisher) Update(pools ...Pool) {
	p.mu.Lock()
	p.pools = make(map[string]Pool, len(pools))
	for _, pool := range pools {
		p.pools[pool.Name] = pool
	}
	p.mu.Unlock()
	p.request()
}

// request asks Run for a pass.
func (p *Publisher) request() {
	p.countRequest()
	p.queue.Add(syncKey)
}

// countRequest counts a pass asked for: the next one that succeeds
// serves it.
func (p *Publisher) countRequest() {
	p.mu.Lock()
	p.requests++
	p.mu.Unlock()
}

// servedAll says whether a pass that succeeded started after every
// request so far: all passes asked for are made.
func (p *Publisher) servedAll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served >= p.requests
}

// Synced is closed once Run made a pass that succeeded, or found that one
// made with Sync served every request so far.
func (p *Publisher) Synced() <-chan struct{} { return p.synced }

const (
	// syncKey asks for a pass.
	syncKey = "sync"
	// checkKey asks for a pass if the slices events showed changes of
	// are not as the last pass left them.
	checkKey = "check"
)

// Run makes passes until ctx ends: after every Update, when someone else
// changed or deleted a slice it manages (after Options.RepairDelay),
// every Options.ResyncPeriod, and again with backoff after a pass failed
// (a conflict, the API gone).
func (p *Publisher) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	if p.ownInformer {
		go p.informer.RunWithContext(ctx)
	}
	if p.opts.ResyncPeriod > 0 {
		go p.resync(ctx)
	}
	// A first pass, unless one made with Sync already served every
	// request (the echoes of its writes are checked as usual).
	if !p.servedAll() {
		p.request()
	}
	for {
		key, shutdown := p.queue.Get()
		if shutdown {
			return
		}
		if key == checkKey && !p.differs() {
			p.queue.Done(key)
			continue
		}
		if key == syncKey && p.servedAll() {
			p.queue.Forget(key)
			p.syncedOnce.Do(func() { close(p.synced) })
			p.queue.Done(key)
			continue
		}
		counts, err := p.Sync(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.report(ctx, err)
			// Not served: the retry makes a pass.
			p.countRequest()
			p.queue.AddRateLimited(syncKey)
		case err == nil:
			p.queue.Forget(syncKey)
			p.syncedOnce.Do(func() { close(p.synced) })
			if counts.Writes() > 0 {
				logger.V(2).Info("Published ResourceSlices", "driver", p.opts.DriverName, "created", counts.Created, "updated", counts.Updated, "deleted", counts.Deleted, "repair", key == checkKey)
			}
		}
		if key == checkKey {
			p.noteRepair(counts.Writes() > 0)
		}
		p.queue.Done(key)
	}
}

func (p *Publisher) report(ctx context.Context, err error) {
	if p.opts.OnError != nil {
		p.opts.OnError(ctx, err)
		return
	}
	klog.FromContext(ctx).Error(err, "Publishing ResourceSlices failed, retrying", "driver", p.opts.DriverName)
}

// Sync makes one pass: it lists the slices the publisher manages and
// writes what differs from the desired pools. An error (a conflict with
// another writer included) leaves a state that the next pass continues
// from; slices are never duplicated because their names are fixed per
// pool and position.
func (p *Publisher) Sync(ctx context.Context) (Counts, error) {
	p.mu.Lock()
	pools := make(map[string]Pool, len(p.pools))
	for name, pool := range p.pools {
		pools[name] = pool
	}
	requests := p.requests
	p.mu.Unlock()

	selector := fields.Set{resourceapi.ResourceSliceSelectorDriver: p.opts.DriverName}
	if p.opts.NodeName != "" {
		selector[resourceapi.ResourceSliceSelectorNodeName] = p.opts.NodeName
	}
	list, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector.AsSelector().String()})
	if err != nil {
		return Counts{}, fmt.Errorf("list slices of driver %s: %w", p.opts.DriverName, err)
	}
	existing := map[string][]*resourcev1.ResourceSlice{}
	state := &passState{rv: map[string]string{}}
	for i := range list.Items {
		slice := &list.Items[i]
		if p.manages(slice, pools) {
			existing[slice.Spec.Pool.Name] = append(existing[slice.Spec.Pool.Name], slice)
			state.rv[slice.Name] = slice.ResourceVersion
		}
	}
	// What this pass left is what the next events are compared with,
	// whether it succeeded or not.
	defer p.setKnown(state)
	names := make([]string, 0, len(pools)+len(existing))
	for name := range pools {
		names = append(names, name)
	}
	for name := range existing {
		if _, ok := pools[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	// Every pool has its own slices: pools are written independently,
	// Workers at a time.
	counts := make([]Counts, len(names))
	errs := make([]error, len(names)+1)
	workqueue.ParallelizeUntil(ctx, max(p.opts.Workers, 1), len(names), func(i int) {
		errs[i] = p.syncPoolByName(ctx, names[i], pools, existing[names[i]], state, &counts[i])
	})
	// Pools not started because ctx ended are not written either.
	errs[len(names)] = ctx.Err()
	var total Counts
	for _, c := range counts {
		total.Created, total.Updated, total.Deleted = total.Created+c.Created, total.Updated+c.Updated, total.Deleted+c.Deleted
	}
	err = errors.Join(errs...)
	if err == nil {
		p.mu.Lock()
		p.served = max(p.served, requests)
		p.mu.Unlock()
	}
	return total, err
}

// syncPoolByName writes one pool of a pass: the desired pool's slices, or
// no slices for a pool that is no longer desired.
func (p *Publisher) syncPoolByName(ctx context.Context, name string, pools map[string]Pool, current []*resourcev1.ResourceSlice, state *passState, counts *Counts) error {
	pool, desired := pools[name]
	if !desired {
		var errs []error
		for _, slice := range current {
			if err := p.delete(ctx, slice, state, counts); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	if err := p.syncPool(ctx, pool, current, state, counts); err != nil {
		return fmt.Errorf("pool %s: %w", name, err)
	}
	return nil
}

// manages says whether a listed slice is the publisher's to keep or
// remove. The API does not let two drivers share a slice, and pool names
// are the driver's own; a node agent manages the slices of its node, a
// cluster-wide publisher those of its pools and the ones without a node
// name that it published.
func (p *Publisher) manages(slice *resourcev1.ResourceSlice, pools map[string]Pool) bool {
	if slice.Spec.Driver != p.opts.DriverName {
		return false
	}
	nodeName := ptr.Deref(slice.Spec.NodeName, "")
	if p.opts.NodeName != "" {
		return nodeName == p.opts.NodeName
	}
	// A slice for no node is the publisher's when it is of a pool it
	// publishes, or one it published before (its label): a repair must not
	// delete a network-attached slice of the driver that someone else made.
	_, desired := pools[slice.Spec.Pool.Name]
	return desired || nodeName == "" && slice.Labels[LabelPublishedBy] == p.label()
}

// syncPool writes the fewest changes that turn the pool's existing slices
// into the desired ones. Slices whose content is already right are kept
// as they are; the others are updated in place, and only the difference in
// number is created or deleted. When slices are created or deleted, or
// when more than one slice changes, the pool's generation goes up so that
// consumers never combine old and new slices (a device moved between two
// slices would otherwise be seen twice or not at all); every slice then
// carries the new generation.
func (p *Publisher) syncPool(ctx context.Context, pool Pool, current []*resourcev1.ResourceSlice, state *passState, counts *Counts) error {
	want, err := p.desiredSpecs(pool)
	if err != nil {
		return err
	}
	generation := int64(0)
	for _, slice := range current {
		generation = max(generation, slice.Spec.Pool.Generation)
	}
	// Older generations and duplicates are superseded: they are reused
	// only as places for changed content.
	slices.SortFunc(current, func(a, b *resourcev1.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })

	matched, free, changed := p.match(pool, want, current)
	var newGeneration int64
	write := true
	if restoring(pool, generation, current, free, len(want), changed) && generation >= p.lastGeneration(pool.Name) {
		// Only slices are missing, and those left are right: the missing
		// ones come back as they were, under the same generation.
		newGeneration = generation
	} else {
		// A pool whose slices are all gone comes back above the
		// generation it had.
		generation = max(generation, p.lastGeneration(pool.Name))
		newGeneration, write = nextGeneration(pool, generation, matched, len(want), len(free) > 0 || len(want) != len(current), changed)
	}
	if !write {
		p.setGeneration(pool.Name, generation)
		return nil
	}

	taken := map[string]bool{}
	for _, slice := range current {
		taken[slice.Name] = true
	}
	var errs []error
	// New slices first, then updates, then deletions: a consumer sees the
	// new generation complete before the old one goes away.
	for i, spec := range want {
		spec.Pool.Generation, spec.Pool.ResourceSliceCount = newGeneration, int64(len(want))
		if matched[i] != nil {
			continue
		}
		name := p.freeName(pool.Name, taken)
		taken[name] = true
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *spec}
		p.setMeta(slice, pool)
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		created, err := p.create(ctx, slice)
		if err != nil {
			// AlreadyExists: written by an earlier pass whose list we did
			// not see; the next pass adopts it.
			errs = append(errs, fmt.Errorf("create slice %s: %w", name, err))
			continue
		}
		state.set(created.GetName(), created.GetResourceVersion())
		counts.Created++
	}
	for i, spec := range want {
		slice := matched[i]
		if slice == nil {
			continue
		}
		if apiequality.Semantic.DeepEqual(&slice.Spec, spec) && p.metaRight(slice, pool) {
			continue
		}
		slice = slice.DeepCopy()
		slice.Spec = *spec
		p.setMeta(slice, pool)
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		updated, err := p.update(ctx, slice)
		if err != nil {
			errs = append(errs, fmt.Errorf("update slice %s: %w", slice.Name, err))
			continue
		}
		state.set(updated.GetName(), updated.GetResourceVersion())
		counts.Updated++
	}
	if len(errs) > 0 {
		// Keep the old slices until the new generation is complete.
		return errors.Join(errs...)
	}
	p.setGeneration(pool.Name, newGeneration)
	for _, slice := range free {
		if err := p.delete(ctx, slice, state, counts); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restoring says whether the only difference between a pool's slices
// and the desired ones is slices that are missing (someone deleted
// them): every slice left has the right content and metadata, and all
// agree on the generation and count the pool should have. Creating the
// missing ones at that generation makes the pool what it was, without
// writing the others.
func restoring(pool Pool, generation int64, current, free []*resourcev1.ResourceSlice, count, changed int) bool {
	if len(free) > 0 || len(current) == 0 || len(current) >= count || changed != count-len(current) || generation < pool.MinGeneration {
		return false
	}
	for _, slice := range current {
		if slice.Spec.Pool.Generation != generation || slice.Spec.Pool.ResourceSliceCount != int64(count) {
			return false
		}
	}
	return true
}

// match pairs every desired spec with an existing slice: first the
// slices whose content already is right, then, in name order, the others
// as places to update in place. It returns the pairs (nil: to create),
// the slices left over (to delete) and how many specs had no slice with
// the right content.
func (p *Publisher) match(pool Pool, want []*resourcev1.ResourceSliceSpec, current []*resourcev1.ResourceSlice) (matched, free []*resourcev1.ResourceSlice, changed int) {
	matched = make([]*resourcev1.ResourceSlice, len(want))
	used := map[*resourcev1.ResourceSlice]bool{}
	for i, spec := range want {
		for _, slice := range current {
			if !used[slice] && sameContent(&slice.Spec, spec) && p.metaRight(slice, pool) {
				matched[i], used[slice] = slice, true
				break
			}
		}
	}
	for _, slice := range current {
		if !used[slice] {
			free = append(free, slice)
		}
	}
	for i := range want {
		if matched[i] == nil {
			changed++
			if len(free) > 0 {
				matched[i], free = free[0], free[1:]
			}
		}
	}
	return matched, free, changed
}

// nextGeneration decides the pool's generation and whether anything is
// to be written: a new generation when slices are added or removed
// (setChanges), when more than one slice changes, for a new pool, or when
// the kept slices disagree on generation or count.
func nextGeneration(pool Pool, generation int64, matched []*resourcev1.ResourceSlice, count int, setChanges bool, changed int) (int64, bool) {
	next := generation
	if setChanges || changed > 1 || generation == 0 {
		next = generation + 1
	}
	next = max(next, pool.MinGeneration)
	if setChanges || changed > 0 || next != generation {
		return next, true
	}
	for _, slice := range matched {
		if slice.Spec.Pool.Generation != generation || slice.Spec.Pool.ResourceSliceCount != int64(count) {
			return generation + 1, true
		}
	}
	return generation, false
}

// create creates a slice and returns the created slice's metadata, all
// the publisher keeps of it.
func (p *Publisher) create(ctx context.Context, slice *resourcev1.ResourceSlice) (metav1.Object, error) {
	opts := metav1.CreateOptions{FieldManager: p.opts.DriverName}
	slices := p.writer(slice).ResourceV1()
	return codec.WriteForMetadata(ctx, slices.RESTClient(), func(c *rest.RESTClient) *rest.Request {
		return c.Post().Resource("resourceslices").VersionedParams(&opts, scheme.ParameterCodec)
	}, slice, func() (*resourcev1.ResourceSlice, error) {
		return slices.ResourceSlices().Create(ctx, slice, opts)
	})
}

// update updates a slice and returns the updated slice's metadata.
func (p *Publisher) update(ctx context.Context, slice *resourcev1.ResourceSlice) (metav1.Object, error) {
	opts := metav1.UpdateOptions{FieldManager: p.opts.DriverName}
	slices := p.writer(slice).ResourceV1()
	return codec.WriteForMetadata(ctx, slices.RESTClient(), func(c *rest.RESTClient) *rest.Request {
		return c.Put().Resource("resourceslices").Name(slice.Name).VersionedParams(&opts, scheme.ParameterCodec)
	}, slice, func() (*resourcev1.ResourceSlice, error) {
		return slices.ResourceSlices().Update(ctx, slice, opts)
	})
}

// writer is the client that writes a slice: its node's, if there is one.
func (p *Publisher) writer(slice *resourcev1.ResourceSlice) versioned.Interface {
	if node := ptr.Deref(slice.Spec.NodeName, ""); node != "" && p.opts.NodeClient != nil {
		return p.opts.NodeClient(node)
	}
	return p.client
}

func (p *Publisher) delete(ctx context.Context, slice *resourcev1.ResourceSlice, state *passState, counts *Counts) error {
	if err := p.limiter.Wait(ctx); err != nil {
		return err
	}
	// A conflict (the name holds another slice now) fails the pass; the
	// next one starts from what it finds.
	deleted, err := DeleteSlice(ctx, p.writer(slice), slice)
	if err != nil {
		return fmt.Errorf("delete slice %s: %w", slice.Name, err)
	}
	state.drop(slice.Name)
	if deleted {
		counts.Deleted++
	}
	return nil
}

// desiredSpecs splits a pool into slice specs at the API's limits: shared
// counters in slices of their own, at most ResourceSliceMaxCounterSets per
// slice; devices at most ResourceSliceMaxDevices per slice, or
// ResourceSliceMaxDevicesWithAdvancedFeatures when a device of the pool has
// taints or consumes counters. Generation and count are filled in later.
func (p *Publisher) desiredSpecs(pool Pool) ([]*resourcev1.ResourceSliceSpec, error) {
	if pool.Name == "" {
		return nil, errors.New("pool without a name")
	}
	where := 0
	if pool.NodeName != "" {
		where++
	}
	if pool.NodeSelector != nil {
		where++
	}
	if pool.AllNodes {
		where++
	}
	if where != 1 {
		return nil, fmt.Errorf("pool %s: exactly one of NodeName, NodeSelector and AllNodes must be set", pool.Name)
	}
	if p.opts.NodeName != "" && pool.NodeName != p.opts.NodeName {
		return nil, fmt.Errorf("pool %s: a publisher of node %s publishes only that node's pools", pool.Name, p.opts.NodeName)
	}
	base := func() *resourcev1.ResourceSliceSpec {
		spec := &resourcev1.ResourceSliceSpec{Driver: p.opts.DriverName, Pool: resourcev1.ResourcePool{Name: pool.Name},
			SkipNodeOperations: slices.Clone(pool.SkipNodeOperations)}
		switch {
		case pool.NodeName != "":
			spec.NodeName = ptr.To(pool.NodeName)
		case pool.NodeSelector != nil:
			spec.NodeSelector = pool.NodeSelector.DeepCopy()
		default:
			spec.AllNodes = ptr.To(true)
		}
		return spec
	}
	var specs []*resourcev1.ResourceSliceSpec
	for chunk := range slices.Chunk(pool.SharedCounters, resourceapi.ResourceSliceMaxCounterSets) {
		spec := base()
		for _, set := range chunk {
			spec.SharedCounters = append(spec.SharedCounters, *set.DeepCopy())
		}
		specs = append(specs, spec)
	}
	perSlice := resourceapi.ResourceSliceMaxDevices
	for _, device := range pool.Devices {
		if len(device.Taints) > 0 || len(device.ConsumesCounters) > 0 {
			perSlice = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			break
		}
	}
	for chunk := range slices.Chunk(pool.Devices, perSlice) {
		spec := base()
		// The devices are shared with the pool, as they are between the
		// passes: nothing writes to either.
		spec.Devices = append(spec.Devices, chunk...)
		specs = append(specs, spec)
	}
	if len(specs) == 0 {
		// An empty pool is published as one empty slice: the pool exists
		// and has no devices.
		specs = append(specs, base())
	}
	return specs, nil
}

// sameContent compares two specs without the pool's generation and count.
// The copies are shallow: the pool is a value inside the spec, and
// nothing else is changed.
//
// Most specs compared are a slice as the server returned it and the spec
// it was created from, equal field for field: reflectequal says so in
// half the time of the semantic comparison, which was 6.7% of the
// server's CPU while 5,000 simulated nodes published. The semantic
// comparison has the last word, since it also finds a quantity equal to
// its other spellings.
func sameContent(a, b *resourcev1.ResourceSliceSpec) bool {
	ac, bc := *a, *b
	ac.Pool.Generation, ac.Pool.ResourceSliceCount = 0, 0
	bc.Pool.Generation, bc.Pool.ResourceSliceCount = 0, 0
	return reflectequal.Equal(&ac, &bc) || apiequality.Semantic.DeepEqual(&ac, &bc)
}

func (p *Publisher) label() string {
	sum := sha256.Sum256([]byte(p.opts.DriverName))
	return hex.EncodeToString(sum[:])[:16]
}

func (p *Publisher) metaRight(slice *resourcev1.ResourceSlice, pool Pool) bool {
	if slice.Labels[LabelPublishedBy] != p.label() {
		return false
	}
	if pool.Owner == nil {
		return len(slice.OwnerReferences) == 0
	}
	return len(slice.OwnerReferences) == 1 && apiequality.Semantic.DeepEqual(slice.OwnerReferences[0], *pool.Owner)
}

func (p *Publisher) setMeta(slice *resourcev1.ResourceSlice, pool Pool) {
	if slice.Labels == nil {
		slice.Labels = map[string]string{}
	}
	slice.Labels[LabelPublishedBy] = p.label()
	slice.OwnerReferences = nil
	if pool.Owner != nil {
		slice.OwnerReferences = []metav1.OwnerReference{*pool.Owner}
	}
}

// SliceNamePrefix is how the names of a pool's slices start: the pool
// name made a DNS label, then a hash of driver and pool so that pools
// whose names differ only in characters a name cannot have stay apart.
func SliceNamePrefix(driverName, poolName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(poolName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 200 {
		name = name[:200]
	}
	sum := sha256.Sum256([]byte(driverName + "/" + poolName))
	if name == "" {
		return hex.EncodeToString(sum[:])[:8] + "-"
	}
	return name + "-" + hex.EncodeToString(sum[:])[:8] + "-"
}

// freeName is the lowest-numbered name of the pool not taken yet. Names
// are fixed per pool and position, so a create that an earlier run made
// fails with AlreadyExists instead of leaving a duplicate.
func (p *Publisher) freeName(poolName string, taken map[string]bool) string {
	prefix := SliceNamePrefix(p.opts.DriverName, poolName)
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		if p.opts.SliceName != nil {
			name = p.opts.SliceName(poolName, i)
		}
		if !taken[name] {
			return name
		}
	}
}
