// Package capacity keeps a live count of every resource pool's devices:
// total, allocated, tainted, unusable and free, shared counters, consumable
// capacity and per DeviceClass matches. It is fed the events of
// ResourceSlices, ResourceClaims, DeviceClasses and DeviceTaintRules and
// recomputes only the pools an event touches, each with the allocator's own
// inventory and in-use accounting, so that its numbers are the ones the
// allocator works with.
package capacity

import (
	"context"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// Change is one pool's new usage, or its removal.
type Change struct {
	Pool    allocator.PoolUsage
	Deleted bool
	// Revision increases with every change the tracker makes.
	Revision uint64
}

// ClassTotal sums one DeviceClass over all pools.
type ClassTotal struct {
	Devices, Free int
}

// Tracker holds the usage of every pool. It is safe for concurrent use.
type Tracker struct {
	alloc *allocator.Allocator

	mu      sync.RWMutex
	classes map[string]*resourceapi.DeviceClass
	rules   map[string]*resourceapi.DeviceTaintRule
	// ownerMark: see SetOwnerMark.
	ownerMark string
	// slices by pool and slice name; slicePool remembers each slice's pool.
	slices    map[allocator.PoolID]map[string]*resourceapi.ResourceSlice
	slicePool map[string]allocator.PoolID
	// claims are the allocated claims, and which pools they use.
	claims     map[types.UID]*resourceapi.AllocationResult
	claimPools map[types.UID][]allocator.PoolID
	poolClaims map[allocator.PoolID]map[types.UID]struct{}

	// inventories holds pools' prepared devices, with the class
	// selectors' results the inventory caches, for as long as the pool's
	// slices, the classes, the rules and the gates stay the same: a claim
	// event, the most frequent one, then only counts the pool again. At
	// most maxInventories are kept, since each holds its pool's devices.
	inventories map[allocator.PoolID]preparedPool

	pools       map[allocator.PoolID]*allocator.PoolUsage
	classTotals map[string]ClassTotal
	revision    uint64
	recomputes  uint64
	prepares    uint64
	listeners   []func(Change)
}

// New returns an empty tracker that evaluates class selectors with alloc's
// selector compiler.
func New(alloc *allocator.Allocator) *Tracker {
	return &Tracker{
		alloc:       alloc,
		classes:     map[string]*resourceapi.DeviceClass{},
		rules:       map[string]*resourceapi.DeviceTaintRule{},
		slices:      map[allocator.PoolID]map[string]*resourceapi.ResourceSlice{},
		slicePool:   map[string]allocator.PoolID{},
		claims:      map[types.UID]*resourceapi.AllocationResult{},
		claimPools:  map[types.UID][]allocator.PoolID{},
		poolClaims:  map[allocator.PoolID]map[types.UID]struct{}{},
		inventories: map[allocator.PoolID]preparedPool{},
		pools:       map[allocator.PoolID]*allocator.PoolUsage{},
		classTotals: map[string]ClassTotal{},
	}
}

// OnChange registers a function called, with the tracker locked, for every
// pool whose usage changes. It must not block or call back into the tracker.
func (t *Tracker) OnChange(f func(Change)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.listeners = append(t.listeners, f)
}

// dirty collects the pools one event touches.
type dirty map[allocator.PoolID]struct{}

func (d dirty) add(ids ...allocator.PoolID) {
	for _, id := range ids {
		d[id] = struct{}{}
	}
}

// SetSlice adds or replaces a ResourceSlice.
func (t *Tracker) SetSlice(ctx context.Context, s *resourceapi.ResourceSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := dirty{}
	id := allocator.PoolID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name}
	if old, ok := t.slicePool[s.Name]; ok && old != id {
		t.removeSlice(old, s.Name)
		d.add(old)
	}
	if t.slices[id] == nil {
		t.slices[id] = map[string]*resourceapi.ResourceSlice{}
	}
	t.slices[id][s.Name] = s
	t.slicePool[s.Name] = id
	d.add(id)
	t.forget(d)
	t.recompute(ctx, d)
}

// DeleteSlice removes a ResourceSlice by name.
func (t *Tracker) DeleteSlice(ctx context.Context, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.slicePool[name]
	if !ok {
		return
	}
	t.removeSlice(id, name)
	d := dirty{id: {}}
	t.forget(d)
	t.recompute(ctx, d)
}

func (t *Tracker) removeSlice(id allocator.PoolID, name string) {
	delete(t.slices[id], name)
	if len(t.slices[id]) == 0 {
		delete(t.slices, id)
	}
	delete(t.slicePool, name)
}

// SetClaim records a claim's allocation (none if it is not allocated).
func (t *Tracker) SetClaim(ctx context.Context, c *resourceapi.ResourceClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := dirty{}
	old := t.claims[c.UID]
	alloc := c.Status.Allocation
	if old == alloc || (old != nil && alloc != nil && sameResults(old, alloc)) {
		return
	}
	d.add(t.claimPools[c.UID]...)
	t.dropClaim(c.UID)
	if alloc != nil {
		t.claims[c.UID] = alloc
		var ids []allocator.PoolID
		for _, r := range alloc.Devices.Results {
			id := allocator.PoolID{Driver: r.Driver, Pool: r.Pool}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		t.claimPools[c.UID] = ids
		for _, id := range ids {
			if t.poolClaims[id] == nil {
				t.poolClaims[id] = map[types.UID]struct{}{}
			}
			t.poolClaims[id][c.UID] = struct{}{}
		}
		d.add(ids...)
	}
	t.recompute(ctx, d)
}

// DeleteClaim forgets a claim.
func (t *Tracker) DeleteClaim(ctx context.Context, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := dirty{}
	d.add(t.claimPools[uid]...)
	t.dropClaim(uid)
	t.recompute(ctx, d)
}

func (t *Tracker) dropClaim(uid types.UID) {
	for _, id := range t.claimPools[uid] {
		delete(t.poolClaims[id], uid)
		if len(t.poolClaims[id]) == 0 {
			delete(t.poolClaims, id)
		}
	}
	delete(t.claimPools, uid)
	delete(t.claims, uid)
}

// sameResults reports whether two allocations hold the same devices in the
// same way; status updates that only touch reservedFor change nothing.
func sameResults(a, b *resourceapi.AllocationResult) bool {
	ra, rb := a.Devices.Results, b.Devices.Results
	if len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		x, y := ra[i], rb[i]
		if x.Driver != y.Driver || x.Pool != y.Pool || x.Device != y.Device ||
			(x.AdminAccess == nil) != (y.AdminAccess == nil) || x.AdminAccess != nil && *x.AdminAccess != *y.AdminAccess ||
			(x.ShareID == nil) != (y.ShareID == nil) || x.ShareID != nil && *x.ShareID != *y.ShareID ||
			len(x.ConsumedCapacity) != len(y.ConsumedCapacity) {
			return false
		}
		for name, q := range x.ConsumedCapacity {
			if q2, ok := y.ConsumedCapacity[name]; !ok || q.Cmp(q2) != 0 {
				return false
			}
		}
	}
	return true
}

// SetClass adds or replaces a DeviceClass; every pool is recounted for it.
func (t *Tracker) SetClass(ctx context.Context, c *resourceapi.DeviceClass) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.classes[c.Name] = c
	clear(t.inventories)
	t.recomputeAll(ctx)
}

// DeleteClass removes a DeviceClass.
func (t *Tracker) DeleteClass(ctx context.Context, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.classes[name]; !ok {
		return
	}
	delete(t.classes, name)
	clear(t.inventories)
	t.recomputeAll(ctx)
}

// SetRule adds or replaces a DeviceTaintRule; the pools it selected before
// and selects now are recounted.
func (t *Tracker) SetRule(ctx context.Context, r *resourceapi.DeviceTaintRule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := dirty{}
	if old, ok := t.rules[r.Name]; ok {
		t.rulePools(old, d)
	}
	t.rules[r.Name] = r
	t.rulePools(r, d)
	clear(t.inventories)
	t.recompute(ctx, d)
}

// DeleteRule removes a DeviceTaintRule.
func (t *Tracker) DeleteRule(ctx context.Context, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.rules[name]
	if !ok {
		return
	}
	d := dirty{}
	t.rulePools(old, d)
	delete(t.rules, name)
	clear(t.inventories)
	t.recompute(ctx, d)
}

// rulePools adds the pools a rule can select.
func (t *Tracker) rulePools(r *resourceapi.DeviceTaintRule, d dirty) {
	sel := r.Spec.DeviceSelector
	if sel == nil {
		return
	}
	if sel.Driver != nil && sel.Pool != nil {
		d.add(allocator.PoolID{Driver: *sel.Driver, Pool: *sel.Pool})
		return
	}
	for id := range t.slices {
		if (sel.Driver == nil || *sel.Driver == id.Driver) && (sel.Pool == nil || *sel.Pool == id.Pool) {
			d.add(id)
		}
	}
}

// maxInventories bounds the prepared inventories kept: pools with
// allocations going on are kept, a cluster's every pool need not be.
const maxInventories = 1024

// forget drops the prepared inventories of pools whose slices changed.
func (t *Tracker) forget(d dirty) {
	for id := range d {
		delete(t.inventories, id)
	}
}

// preparedPool is one pool's inventory and the gates it was prepared
// with.
type preparedPool struct {
	inv   *allocator.Inventory
	gates gates
}

// gates are the feature gates that shape an inventory. They are fixed
// while the server runs; tests flip them between events.
type gates struct {
	rules, bindingConditions, taints, fractionalCapacity bool
}

func currentGates() gates {
	return gates{
		rules:              features.Enabled(features.DRADeviceTaintRules),
		bindingConditions:  features.Enabled(features.DRADeviceBindingConditions),
		taints:             features.Enabled(features.DRADeviceTaints),
		fractionalCapacity: features.Enabled(features.DRAFractionalCapacityRange),
	}
}

func (t *Tracker) recomputeAll(ctx context.Context) {
	d := dirty{}
	for id := range t.slices {
		d.add(id)
	}
	t.recompute(ctx, d)
}

// recompute counts the dirty pools again, each on its own.
func (t *Tracker) recompute(ctx context.Context, d dirty) {
	ids := make([]allocator.PoolID, 0, len(d))
	for id := range d {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b allocator.PoolID) int {
		if c := strings.Compare(a.Driver, b.Driver); c != 0 {
			return c
		}
		return strings.Compare(a.Pool, b.Pool)
	})
	g := currentGates()
	for _, id := range ids {
		t.recomputePool(ctx, id, g)
	}
}

func (t *Tracker) recomputePool(ctx context.Context, id allocator.PoolID, g gates) {
	old := t.pools[id]
	var usage *allocator.PoolUsage
	if byName := t.slices[id]; len(byName) > 0 {
		t.recomputes++
		prepared, ok := t.inventories[id]
		if !ok || prepared.gates != g {
			prepared = preparedPool{inv: t.prepare(byName, g), gates: g}
			if _, replaced := t.inventories[id]; !replaced && len(t.inventories) >= maxInventories {
				// Full: forget one, whichever the map yields first.
				for other := range t.inventories {
					delete(t.inventories, other)
					break
				}
			}
			t.inventories[id] = prepared
		}
		inUse := allocator.NewInUse()
		for uid := range t.poolClaims[id] {
			inUse.SetClaim(uid, t.claims[uid])
		}
		for _, u := range prepared.inv.State(inUse).Usage(ctx) {
			if u.ID == id {
				usage = &u
			}
		}
	}
	if old != nil {
		for _, c := range old.Classes {
			ct := t.classTotals[c.Class]
			ct.Devices -= c.Devices
			ct.Free -= c.Free
			t.classTotals[c.Class] = ct
		}
	}
	if usage == nil {
		if old == nil {
			return
		}
		delete(t.pools, id)
		t.revision++
		t.notify(Change{Pool: *old, Deleted: true, Revision: t.revision})
		return
	}
	for _, c := range usage.Classes {
		ct := t.classTotals[c.Class]
		ct.Devices += c.Devices
		ct.Free += c.Free
		t.classTotals[c.Class] = ct
	}
	for name, ct := range t.classTotals {
		if _, ok := t.classes[name]; !ok && ct == (ClassTotal{}) {
			delete(t.classTotals, name)
		}
	}
	t.pools[id] = usage
	if old != nil && equality.Semantic.DeepEqual(old, usage) {
		// A class or rule that changes nothing in this pool.
		return
	}
	t.revision++
	t.notify(Change{Pool: *usage, Revision: t.revision})
}

// prepare builds the inventory of one pool's slices with the same gates
// as the allocation controller's snapshot.
func (t *Tracker) prepare(byName map[string]*resourceapi.ResourceSlice, g gates) *allocator.Inventory {
	var rules []*resourceapi.DeviceTaintRule
	// As for the allocator, rules taint nothing while their gate is off.
	if g.rules {
		for _, r := range t.rules {
			rules = append(rules, r)
		}
	}
	slices.SortFunc(rules, func(a, b *resourceapi.DeviceTaintRule) int { return strings.Compare(a.Name, b.Name) })
	if t.ownerMark != "" {
		rules = slices.DeleteFunc(rules, func(r *resourceapi.DeviceTaintRule) bool { return r.Spec.Taint.Key == t.ownerMark })
	}
	snap := allocator.Snapshot{Classes: t.classes, TaintRules: rules,
		WithoutBindingConditions: !g.bindingConditions,
		WithoutDeviceTaints:      !g.taints,
		WholeUnitCapacitySteps:   !g.fractionalCapacity}
	for _, s := range byName {
		snap.Slices = append(snap.Slices, withoutMark(s, t.ownerMark))
	}
	t.prepares++
	return t.alloc.Prepare(snap)
}

// SetOwnerMark names the taint key that marks the devices draplane
// places beside another scheduler (cluster mode). The mark keeps the
// other scheduler off a device; it is no taint of the device, so the
// usage does not count it as one.
func (t *Tracker) SetOwnerMark(ctx context.Context, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ownerMark = key
	clear(t.inventories)
	t.recomputeAll(ctx)
}

// withoutMark is the slice without the taints of key on its devices: the
// slice itself when none has one, else a copy.
func withoutMark(s *resourceapi.ResourceSlice, key string) *resourceapi.ResourceSlice {
	isMark := func(taint resourceapi.DeviceTaint) bool { return taint.Key == key }
	if key == "" || !slices.ContainsFunc(s.Spec.Devices, func(d resourceapi.Device) bool { return slices.ContainsFunc(d.Taints, isMark) }) {
		return s
	}
	out := *s
	out.Spec.Devices = slices.Clone(s.Spec.Devices)
	for i := range out.Spec.Devices {
		out.Spec.Devices[i].Taints = slices.DeleteFunc(slices.Clone(out.Spec.Devices[i].Taints), isMark)
	}
	return &out
}

func (t *Tracker) notify(c Change) {
	for _, f := range t.listeners {
		f(c)
	}
}

// Pools returns every pool's usage, sorted by driver and pool, and the
// revision they are at.
func (t *Tracker) Pools() ([]allocator.PoolUsage, uint64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]allocator.PoolUsage, 0, len(t.pools))
	for _, u := range t.pools {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b allocator.PoolUsage) int {
		if c := strings.Compare(a.ID.Driver, b.ID.Driver); c != 0 {
			return c
		}
		return strings.Compare(a.ID.Pool, b.ID.Pool)
	})
	return out, t.revision
}

// Pool returns one pool's usage.
func (t *Tracker) Pool(id allocator.PoolID) (allocator.PoolUsage, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	u, ok := t.pools[id]
	if !ok {
		return allocator.PoolUsage{}, false
	}
	return *u, true
}

// Classes returns per DeviceClass the devices it matches in all pools and
// how many of them are free.
func (t *Tracker) Classes() map[string]ClassTotal {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]ClassTotal, len(t.classes))
	for name := range t.classes {
		out[name] = t.classTotals[name]
	}
	return out
}

// Recomputes is how many times a single pool was counted, for tests and
// benchmarks that check events stay local.
func (t *Tracker) Recomputes() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.recomputes
}
