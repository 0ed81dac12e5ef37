package allocator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

// Snapshot is the cluster state the allocator works from: device classes,
// ResourceSlices and DeviceTaintRules. It is prepared once with
// Allocator.Prepare and then shared by many Allocate calls.
type Snapshot struct {
	Classes    map[string]*resourceapi.DeviceClass
	Slices     []*resourceapi.ResourceSlice
	TaintRules []*resourceapi.DeviceTaintRule
	// WithoutBindingConditions leaves devices that list bindingConditions
	// out of every node's view, as upstream's allocator does with the
	// DRADeviceBindingConditions gate off: they are never allocated, but
	// allocations that hold them still count.
	WithoutBindingConditions bool
	// WithoutDeviceTaints ignores the taints of devices, those in slices
	// and those of TaintRules, as upstream's allocator does with the
	// DRADeviceTaints gate off: a tainted device is allocated as if it
	// were not tainted, whatever the request tolerates.
	WithoutDeviceTaints bool
	// WholeUnitCapacitySteps rounds the requests of a capacity range with
	// a step in whole units, its min and step rounded up to whole units
	// too, as upstream's allocator does with the DRAFractionalCapacityRange
	// gate off. Otherwise the steps are taken in milli-units.
	WholeUnitCapacitySteps bool
}

// DeviceID names one device.
type DeviceID struct {
	Driver, Pool, Device string
}

func (id DeviceID) String() string { return id.Driver + "/" + id.Pool + "/" + id.Device }

// PoolID names one resource pool.
type PoolID struct {
	Driver, Pool string
}

func (id PoolID) String() string { return id.Driver + "/" + id.Pool }

// pool is the highest generation of one resource pool.
type pool struct {
	id         PoolID
	generation int64
	// incomplete explains why the newest generation does not have exactly
	// the announced number of slices, empty when it does. With fewer, the
	// pool may be missing devices; with more, the slices come from a
	// publisher that changed the pool without a new generation, or from two
	// publishers of one pool name. Either way nothing is taken from it.
	incomplete string
	// invalid explains why the pool cannot be used, empty when it can.
	invalid string
	devices []*device
	// slices are the slices of the newest generation, sorted by name.
	slices []*resourceapi.ResourceSlice
	// counters index Inventory.counterTotals.
	counters []int
}

func (p *pool) unusable() bool { return p.incomplete != "" || p.invalid != "" }

func (p *pool) problem() string {
	if p.invalid != "" {
		return fmt.Sprintf("pool %s is invalid: %s", p.id, p.invalid)
	}
	return fmt.Sprintf("pool %s is incomplete: %s", p.id, p.incomplete)
}

// sliceCountProblem says why a generation with have slices, announcing want
// each, is not a complete pool; empty when it is.
func sliceCountProblem(generation, have, want int64) string {
	switch {
	case have < want:
		return fmt.Sprintf("%d of the %d ResourceSlices of generation %d are visible", have, want, generation)
	case have > want:
		return fmt.Sprintf("%d ResourceSlices of generation %d are visible but the pool announces resourceSliceCount %d", have, generation, want)
	}
	return ""
}

// device is one device of a usable-or-not pool with everything the search
// needs precomputed.
type device struct {
	index int
	// local numbers the node of a device of a usable pool that is
	// available on that node only (State counts them per node); -1 for
	// the others.
	local int32
	id    DeviceID
	api   *resourceapi.Device
	slice *resourceapi.ResourceSlice
	pool  *pool

	// Where the device can be used.
	nodeName     string
	allNodes     bool
	nodeSelector *corev1.NodeSelector

	taints   []resourceapi.DeviceTaint
	counters []counterUse
	multi    bool
	caps     []deviceCapacity
	selector SelectorDevice
}

type counterUse struct {
	counter int // index into Inventory.counterTotals
	amount  int64
}

type deviceCapacity struct {
	name   resourceapi.QualifiedName
	total  int64 // milli-units
	format resource.Format
	policy *capacityPolicy
}

// Inventory is a prepared Snapshot: pools grouped and checked, devices
// indexed, per-node device lists and selector results cached. It is safe for
// concurrent use.
type Inventory struct {
	compiler SelectorCompiler
	classes  map[string]*resourceapi.DeviceClass
	devices  []*device
	pools    []*pool // sorted by driver and pool
	byID     map[DeviceID]*device

	counterTotals  []int64
	counterNames   []string          // "pool/set/counter" for explanations
	counterFormats []resource.Format // as the slice wrote the total

	byNode   map[string][]*device
	floating []*device // devices usable on more than one node
	// localIndex numbers the nodes in byNode (device.local);
	// localNodes is how many there are.
	localIndex map[string]int32
	localNodes int

	// withoutBindingConditions: see Snapshot.
	withoutBindingConditions bool
	wholeUnitCapacitySteps   bool

	viewsMu sync.Mutex
	views   map[string]*nodeView
	// lastViews are the views of the node list ChooseNode was given last.
	lastViews *viewList

	exprsMu sync.RWMutex
	exprs   map[string]*exprCache

	// listAttributes holds the fully qualified names of attributes that a
	// device publishes as a list; constraints do not compare them yet.
	listAttributes map[resourceapi.FullyQualifiedName]bool

	// Attribute values used by constraints, interned per attribute name.
	attrsMu  sync.RWMutex
	attrs    map[resourceapi.FullyQualifiedName]*attrCache
	internMu sync.Mutex
	interned map[string]int32
}

// maxCachedExpressions bounds the selector cache; request selectors come
// from users and can be arbitrarily many.
const maxCachedExpressions = 4096

// Prepare groups the snapshot's slices into pools and indexes devices.
func (a *Allocator) Prepare(snap Snapshot) *Inventory {
	inv := &Inventory{
		compiler: a.compiler,
		classes:  snap.Classes,
		byID:     make(map[DeviceID]*device),
		byNode:   make(map[string][]*device),
		views:    make(map[string]*nodeView),
		exprs:    make(map[string]*exprCache),
		attrs:    make(map[resourceapi.FullyQualifiedName]*attrCache),
		interned: make(map[string]int32),

		withoutBindingConditions: snap.WithoutBindingConditions,
		wholeUnitCapacitySteps:   snap.WholeUnitCapacitySteps,
	}
	if inv.classes == nil {
		inv.classes = map[string]*resourceapi.DeviceClass{}
	}

	grouped := make(map[PoolID][]*resourceapi.ResourceSlice)
	for _, s := range snap.Slices {
		id := PoolID{s.Spec.Driver, s.Spec.Pool.Name}
		grouped[id] = append(grouped[id], s)
	}
	ids := make([]PoolID, 0, len(grouped))
	for id := range grouped {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b PoolID) int {
		return cmp.Or(strings.Compare(a.Driver, b.Driver), strings.Compare(a.Pool, b.Pool))
	})

	for _, id := range ids {
		inv.addPool(id, grouped[id], snap.TaintRules, snap.WithoutDeviceTaints)
	}
	inv.numberLocal()
	return inv
}

// numberLocal numbers the nodes with devices of their own, and their
// devices of usable pools with it.
func (inv *Inventory) numberLocal() {
	inv.localIndex = make(map[string]int32, len(inv.byNode))
	for name, devices := range inv.byNode {
		local := int32(len(inv.localIndex))
		inv.localIndex[name] = local
		for _, d := range devices {
			if !d.pool.unusable() {
				d.local = local
			}
		}
	}
	inv.localNodes = len(inv.localIndex)
}

// addPool adds the devices of a pool's newest generation; a pool whose
// slices disagree or are incomplete is recorded as such.
func (inv *Inventory) addPool(id PoolID, all []*resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule, withoutTaints bool) {
	gen, current := newestGeneration(all)
	p := &pool{id: id, generation: gen, slices: current}
	inv.pools = append(inv.pools, p)
	want := current[0].Spec.Pool.ResourceSliceCount
	for _, s := range current {
		if s.Spec.Pool.ResourceSliceCount != want {
			p.invalid = "slices disagree on resourceSliceCount"
		}
	}
	p.incomplete = sliceCountProblem(gen, int64(len(current)), want)
	counterIndex := inv.addCounterSets(p, current)

	seen := make(map[string]bool)
	for _, s := range current {
		if len(s.Spec.SharedCounters) > 0 {
			// A slice publishes either counter sets or devices; validation
			// rejects both, and like upstream the devices of such a slice are
			// not used.
			continue
		}
		perDevice := s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection
		for i := range s.Spec.Devices {
			api := &s.Spec.Devices[i]
			if seen[api.Name] {
				p.invalid = fmt.Sprintf("device %q listed twice", api.Name)
			}
			seen[api.Name] = true
			d := inv.newDevice(p, s, api, perDevice)
			if !withoutTaints {
				d.taints = deviceTaints(d, rules)
			}
			d.counters = counterUses(p, api, counterIndex)
			d.caps = deviceCapacities(api, inv.wholeUnitCapacitySteps)
			inv.addDevice(p, d)
		}
	}
}

// newestGeneration returns the newest generation of a pool and its slices,
// sorted by name.
func newestGeneration(all []*resourceapi.ResourceSlice) (int64, []*resourceapi.ResourceSlice) {
	var gen int64 = -1 << 63
	for _, s := range all {
		gen = max(gen, s.Spec.Pool.Generation)
	}
	var current []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.Pool.Generation == gen {
			current = append(current, s)
		}
	}
	slices.SortStableFunc(current, func(a, b *resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	return gen, current
}

// addCounterSets numbers the shared counters of a pool, which may be
// published in any of its slices, and returns their indexes by set and
// counter name.
func (inv *Inventory) addCounterSets(p *pool, current []*resourceapi.ResourceSlice) map[string]map[string]int {
	counterIndex := make(map[string]map[string]int)
	for _, s := range current {
		for _, set := range s.Spec.SharedCounters {
			if _, dup := counterIndex[set.Name]; dup {
				p.invalid = fmt.Sprintf("counter set %q defined twice", set.Name)
				continue
			}
			names := make([]string, 0, len(set.Counters))
			for name := range set.Counters {
				names = append(names, name)
			}
			slices.Sort(names)
			m := make(map[string]int, len(names))
			for _, name := range names {
				m[name] = len(inv.counterTotals)
				p.counters = append(p.counters, len(inv.counterTotals))
				q := set.Counters[name].Value
				inv.counterTotals = append(inv.counterTotals, q.MilliValue())
				inv.counterFormats = append(inv.counterFormats, q.Format)
				inv.counterNames = append(inv.counterNames, p.id.String()+"/"+set.Name+"/"+name)
			}
			counterIndex[set.Name] = m
		}
	}
	return counterIndex
}

// newDevice describes one device of slice s, with the nodes it is
// available on.
func (inv *Inventory) newDevice(p *pool, s *resourceapi.ResourceSlice, api *resourceapi.Device, perDevice bool) *device {
	id := p.id
	d := &device{
		index: len(inv.devices),
		local: -1,
		id:    DeviceID{id.Driver, id.Pool, api.Name},
		api:   api,
		slice: s,
		pool:  p,
		multi: api.AllowMultipleAllocations != nil && *api.AllowMultipleAllocations,
		selector: SelectorDevice{
			Driver:                   id.Driver,
			Attributes:               api.Attributes,
			Capacity:                 api.Capacity,
			AllowMultipleAllocations: api.AllowMultipleAllocations,
		},
	}
	if perDevice {
		d.nodeName = deref(api.NodeName)
		d.allNodes = api.AllNodes != nil && *api.AllNodes
		d.nodeSelector = api.NodeSelector
	} else {
		d.nodeName = deref(s.Spec.NodeName)
		d.allNodes = s.Spec.AllNodes != nil && *s.Spec.AllNodes
		d.nodeSelector = s.Spec.NodeSelector
	}
	return d
}

// counterUses resolves what a device consumes from the pool's shared
// counters; a set or counter the pool does not have makes the pool
// invalid.
func counterUses(p *pool, api *resourceapi.Device, counterIndex map[string]map[string]int) []counterUse {
	var uses []counterUse
	for _, use := range api.ConsumesCounters {
		set, ok := counterIndex[use.CounterSet]
		if !ok {
			p.invalid = fmt.Sprintf("device %q consumes from unknown counter set %q", api.Name, use.CounterSet)
			continue
		}
		names := make([]string, 0, len(use.Counters))
		for name := range use.Counters {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			idx, ok := set[name]
			if !ok {
				p.invalid = fmt.Sprintf("device %q consumes unknown counter %q of set %q", api.Name, name, use.CounterSet)
				continue
			}
			q := use.Counters[name].Value
			uses = append(uses, counterUse{counter: idx, amount: q.MilliValue()})
		}
	}
	return uses
}

// deviceCapacities lists a device's capacities sorted by name.
func deviceCapacities(api *resourceapi.Device, wholeUnitSteps bool) []deviceCapacity {
	capNames := make([]resourceapi.QualifiedName, 0, len(api.Capacity))
	for name := range api.Capacity {
		capNames = append(capNames, name)
	}
	slices.Sort(capNames)
	var caps []deviceCapacity
	for _, name := range capNames {
		c := api.Capacity[name]
		caps = append(caps, deviceCapacity{name: name, total: c.Value.MilliValue(), format: c.Value.Format, policy: newCapacityPolicy(c.RequestPolicy, wholeUnitSteps)})
	}
	return caps
}

// addDevice makes a device known by ID and by the nodes it is on.
func (inv *Inventory) addDevice(p *pool, d *device) {
	p.devices = append(p.devices, d)
	inv.devices = append(inv.devices, d)
	inv.byID[d.id] = d
	if inv.withheld(d) {
		return
	}
	for name, attr := range d.api.Attributes {
		if attr.IntValues == nil && attr.BoolValues == nil && attr.StringValues == nil && attr.VersionValues == nil {
			continue
		}
		if inv.listAttributes == nil {
			inv.listAttributes = make(map[resourceapi.FullyQualifiedName]bool)
		}
		qualified := resourceapi.FullyQualifiedName(name)
		if !strings.Contains(string(name), "/") {
			qualified = resourceapi.FullyQualifiedName(d.id.Driver + "/" + string(name))
		}
		inv.listAttributes[qualified] = true
	}
	if d.nodeName != "" {
		inv.byNode[d.nodeName] = append(inv.byNode[d.nodeName], d)
	} else if d.allNodes || d.nodeSelector != nil {
		inv.floating = append(inv.floating, d)
	}
}

// withheld reports whether the device is left out of every node's view:
// it lists binding conditions while they are not honoured.
func (inv *Inventory) withheld(d *device) bool {
	return inv.withoutBindingConditions && len(d.api.BindingConditions) > 0
}

// deviceTaints returns the device's own taints followed by those of the
// DeviceTaintRules that select it.
func deviceTaints(d *device, rules []*resourceapi.DeviceTaintRule) []resourceapi.DeviceTaint {
	taints := d.api.Taints
	for _, r := range rules {
		// A rule without a selector matches no device (only an explicit,
		// confirmed {} selects them all), as the eviction controller reads it.
		sel := r.Spec.DeviceSelector
		if sel == nil {
			continue
		}
		if sel.Driver != nil && *sel.Driver != d.id.Driver ||
			sel.Pool != nil && *sel.Pool != d.id.Pool ||
			sel.Device != nil && *sel.Device != d.id.Device {
			continue
		}
		taints = append(slices.Clip(taints), r.Spec.Taint)
	}
	return taints
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nodeView is what one node sees of the inventory.
type nodeView struct {
	resourceVersion string
	// devices are the devices of usable pools reachable from the node, in
	// pool, slice, device order.
	devices []*device
	// unusable are the pools with devices reachable from the node that
	// can't be used (incomplete or invalid).
	unusable []*pool
	// plain is set when no device consumes counters or allows multiple
	// allocations: then any devices that pass the per-device checks can be
	// allocated together, and their order carries no preference.
	plain bool
	// multi is set when some device allows multiple allocations.
	multi bool
	// local is the node's number (device.local) when its devices are
	// all its own, so that State counts them; -1 otherwise.
	local int32
}

// view returns the node's devices, computed once per node (and again when
// the node object changes).
func (inv *Inventory) view(node *corev1.Node) *nodeView {
	inv.viewsMu.Lock()
	v, ok := inv.views[node.Name]
	inv.viewsMu.Unlock()
	if ok && v.resourceVersion == node.ResourceVersion {
		return v
	}
	v = &nodeView{resourceVersion: node.ResourceVersion, local: -1}
	local := inv.byNode[node.Name]
	all := make([]*device, 0, len(local))
	all = append(all, local...)
	for _, d := range inv.floating {
		if d.allNodes || nodeaffinity.NodeSelectorMatches(d.nodeSelector, node) {
			all = append(all, d)
		}
	}
	if i, ok := inv.localIndex[node.Name]; ok && len(all) == len(local) {
		v.local = i
	}
	slices.SortFunc(all, func(a, b *device) int { return a.index - b.index })
	var last *pool
	v.plain = true
	for _, d := range all {
		if len(d.counters) > 0 || d.multi {
			v.plain = false
		}
		v.multi = v.multi || d.multi
		if d.pool != last {
			last = d.pool
			if d.pool.unusable() {
				v.unusable = append(v.unusable, d.pool)
			}
		}
		if !d.pool.unusable() {
			v.devices = append(v.devices, d)
		}
	}
	inv.viewsMu.Lock()
	inv.views[node.Name] = v
	inv.viewsMu.Unlock()
	return v
}

// viewList holds the views of a list of nodes, in its order, with what
// ChooseNode reads of each in arrays of their own.
type viewList struct {
	nodes []*corev1.Node
	views []*nodeView
	local []int32
	total []int32
	multi []bool
	// sorted: the node names do not descend.
	sorted bool
}

// viewsOf returns the views of the nodes. The list of the previous call is
// kept: the same node objects again, as the allocation controller passes
// them while no node changes, cost one comparison each.
func (inv *Inventory) viewsOf(nodes []*corev1.Node) *viewList {
	inv.viewsMu.Lock()
	last := inv.lastViews
	inv.viewsMu.Unlock()
	if last != nil && slices.Equal(last.nodes, nodes) {
		return last
	}
	l := &viewList{nodes: slices.Clone(nodes), views: make([]*nodeView, len(nodes)),
		local: make([]int32, len(nodes)), total: make([]int32, len(nodes)), multi: make([]bool, len(nodes)), sorted: true}
	for i, node := range nodes {
		v := inv.view(node)
		l.views[i], l.local[i], l.total[i], l.multi[i] = v, v.local, int32(len(v.devices)), v.multi
		if i > 0 && node.Name < nodes[i-1].Name {
			l.sorted = false
		}
	}
	inv.viewsMu.Lock()
	inv.lastViews = l
	inv.viewsMu.Unlock()
	return l
}

// exprCache remembers one selector expression's result per device.
type exprCache struct {
	expression string
	prog       SelectorProgram
	compileErr error
	// results holds per device: 0 not evaluated yet, 1 match, 2 no match,
	// 3 evaluation error.
	results []atomic.Uint32
	errs    sync.Map // device index -> error
}

const (
	exprUnknown uint32 = iota
	exprMatch
	exprNoMatch
	exprError
)

func (inv *Inventory) expr(expression string) *exprCache {
	inv.exprsMu.RLock()
	e, ok := inv.exprs[expression]
	inv.exprsMu.RUnlock()
	if ok {
		return e
	}
	e = &exprCache{expression: expression, results: make([]atomic.Uint32, len(inv.devices))}
	e.prog, e.compileErr = inv.compiler.Compile(expression)
	inv.exprsMu.Lock()
	defer inv.exprsMu.Unlock()
	if existing, ok := inv.exprs[expression]; ok {
		return existing
	}
	if len(inv.exprs) < maxCachedExpressions {
		inv.exprs[expression] = e
	}
	return e
}

// match evaluates the expression for a device, at most once per device.
func (e *exprCache) match(ctx context.Context, d *device) (bool, error) {
	switch e.results[d.index].Load() {
	case exprMatch:
		return true, nil
	case exprNoMatch:
		return false, nil
	case exprError:
		err, _ := e.errs.Load(d.index)
		return false, err.(error)
	}
	ok, err := e.prog.Matches(ctx, d.selector)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			// Cancellation says nothing about the device; don't cache it.
			return false, err
		}
		e.errs.Store(d.index, err)
		e.results[d.index].Store(exprError)
		return false, err
	case ok:
		e.results[d.index].Store(exprMatch)
	default:
		e.results[d.index].Store(exprNoMatch)
	}
	return ok, nil
}

// attrCache holds one attribute's interned value per device: -1 when the
// device lacks it, attrUnknown before it was looked up.
type attrCache struct {
	keys []atomic.Int32
}

const attrUnknown = -2

func (inv *Inventory) attribute(name resourceapi.FullyQualifiedName) *attrCache {
	inv.attrsMu.RLock()
	c, ok := inv.attrs[name]
	inv.attrsMu.RUnlock()
	if ok {
		return c
	}
	inv.attrsMu.Lock()
	defer inv.attrsMu.Unlock()
	if c, ok := inv.attrs[name]; ok {
		return c
	}
	c = &attrCache{keys: make([]atomic.Int32, len(inv.devices))}
	for i := range c.keys {
		c.keys[i].Store(attrUnknown)
	}
	if len(inv.attrs) < maxCachedExpressions {
		inv.attrs[name] = c
	}
	return c
}

// attributeKey returns the interned typed value of a device attribute;
// values of different types never compare equal. -1 means the device lacks
// the attribute.
func (inv *Inventory) attributeKey(c *attrCache, d *device, name resourceapi.FullyQualifiedName) int32 {
	if k := c.keys[d.index].Load(); k != attrUnknown {
		return k
	}
	k := int32(-1)
	if attr, ok := lookupAttribute(d, name); ok {
		var key string
		switch {
		case attr.StringValue != nil:
			key = "s" + *attr.StringValue
		case attr.IntValue != nil:
			key = "i" + strconv.FormatInt(*attr.IntValue, 10)
		case attr.BoolValue != nil:
			key = "b" + strconv.FormatBool(*attr.BoolValue)
		case attr.VersionValue != nil:
			key = "v" + *attr.VersionValue
		}
		if key != "" {
			inv.internMu.Lock()
			id, ok := inv.interned[key]
			if !ok {
				id = int32(len(inv.interned))
				inv.interned[key] = id
			}
			inv.internMu.Unlock()
			k = id
		}
	}
	c.keys[d.index].Store(k)
	return k
}
