// Package devicemap serves a read-only web page of the devices the server
// knows: a grid of nodes × devices coloured by state, the claims and pods
// holding each device, the pods waiting for devices with their reason, and
// the pool view's totals per DeviceClass. The page (embedded, hand-written
// JavaScript) is fed by server-sent events from informers on the server's
// own API: a snapshot when it connects, then only the nodes that changed.
package devicemap

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator/capacity"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1informers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
)

// Path is where the page is served; EventsPath streams its updates.
const (
	Path       = "/devicemap/"
	EventsPath = Path + "events"
)

// Device states, as the page colours them and its DOM names them
// (data-state). One state per device; a tainted device that is also
// allocated shows as tainted, its holders in its details.
const (
	StateFree        = "free"
	StateAllocated   = "allocated"
	StateAdminAccess = "admin-access"
	StateNoSchedule  = "tainted-noschedule"
	StateNoExecute   = "tainted-noexecute"
	StateShared      = "shared"
	StatePartition   = "partition"
)

// flushDelay gathers the events of a burst into one update.
const flushDelay = 100 * time.Millisecond

// subscriberBuffer is how many updates a page may fall behind before its
// stream is closed; the browser reconnects and gets a new snapshot.
const subscriberBuffer = 64

// maxPending is how many waiting pods an update lists; the total is sent
// beside them.
const maxPending = 200

//go:embed assets
var assets embed.FS

// Map keeps the page's view of the devices and streams it.
type Map struct {
	tracker *capacity.Tracker

	mu     sync.Mutex
	slices map[string]*resourcev1.ResourceSlice
	// nodeSlices: node key -> slice names.
	nodeSlices map[string]map[string]struct{}
	// poolNodes: "driver/pool" -> node keys of its slices.
	poolNodes map[string]map[string]struct{}
	claims    map[types.UID]*resourcev1.ResourceClaim
	// holders: "driver/pool/device" -> claims allocated the device.
	holders map[string]map[types.UID]holder
	rules   map[string]*resourcev1.DeviceTaintRule
	pending map[types.NamespacedName]Pending
	// reasons are those the pending pods gauge was set for.
	reasons map[string]struct{}

	rows         map[string]json.RawMessage
	dirtyNodes   map[string]struct{}
	dirtyAll     bool
	dirtyPending bool
	dirtyClasses bool
	pendingJSON  json.RawMessage
	classesJSON  json.RawMessage
	flushing     bool
	// manual: only Flush calls flush (tests and benchmarks).
	manual  bool
	updates uint64

	subscribers map[*subscriber]struct{}

	// ownerMark is the key of the taint that marks draplane's devices in
	// cluster mode, or "".
	ownerMark string
}

// SetOwnerMark names the taint key that marks the devices draplane
// places beside another scheduler (cluster mode): such a taint keeps the
// other scheduler off the device and is no taint for draplane, so the
// map shows the device as owned, not tainted. Call it before Start.
func (m *Map) SetOwnerMark(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ownerMark = key
}

type holder struct {
	Claim       string
	Pods        []string
	AdminAccess bool
	Share       bool
}

type subscriber struct {
	ch chan []byte
}

// Row is one node's devices as the page gets them.
type Row struct {
	Node    string   `json:"node"`
	Devices []Device `json:"devices"`
}

// Device is one device of a row.
type Device struct {
	// ID is "<driver>/<pool>/<device>".
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	State  string   `json:"state"`
	Taints []string `json:"taints,omitempty"`
	// Owned: the device carries the owner mark (SetOwnerMark), which is
	// not shown as a taint.
	Owned  bool    `json:"owned,omitempty"`
	Claims []Claim `json:"claims,omitempty"`
	// Partition names the allocated devices that share a counter set
	// with this one (partition in use).
	Partition []string `json:"partition,omitempty"`
}

// Claim holds a device.
type Claim struct {
	Name        string   `json:"name"`
	Pods        []string `json:"pods,omitempty"`
	AdminAccess bool     `json:"adminAccess,omitempty"`
}

// Pending is a pod waiting for devices.
type Pending struct {
	Pod     string `json:"pod"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ClassTotal is the pool view's count of one class.
type ClassTotal struct {
	Name    string `json:"name"`
	Devices int    `json:"devices"`
	Free    int    `json:"free"`
}

// message is one server-sent event's data.
type message struct {
	Type string `json:"type"` // "snapshot" or "update"
	// Nodes are every node (snapshot) or those that changed (update).
	Nodes   []json.RawMessage `json:"nodes"`
	Removed []string          `json:"removed,omitempty"`
	// Pending and Classes are sent whole when they changed.
	Pending json.RawMessage `json:"pending,omitempty"`
	Classes json.RawMessage `json:"classes,omitempty"`
}

// New returns a Map whose class totals come from tracker (the pool view's).
func New(tracker *capacity.Tracker) *Map {
	m := &Map{
		tracker:     tracker,
		slices:      map[string]*resourcev1.ResourceSlice{},
		nodeSlices:  map[string]map[string]struct{}{},
		poolNodes:   map[string]map[string]struct{}{},
		claims:      map[types.UID]*resourcev1.ResourceClaim{},
		holders:     map[string]map[types.UID]holder{},
		rules:       map[string]*resourcev1.DeviceTaintRule{},
		pending:     map[types.NamespacedName]Pending{},
		reasons:     map[string]struct{}{},
		rows:        map[string]json.RawMessage{},
		dirtyNodes:  map[string]struct{}{},
		subscribers: map[*subscriber]struct{}{},
		pendingJSON: json.RawMessage("[]"),
		classesJSON: json.RawMessage("[]"),
	}
	if tracker != nil {
		tracker.OnChange(func(capacity.Change) {
			// Called with the tracker locked: only note it.
			m.mu.Lock()
			m.dirtyClasses = true
			m.scheduleLocked()
			m.mu.Unlock()
		})
	}
	return m
}

// Informers are what the map watches; Pods may be nil (aggregated mode,
// where pods are the host cluster's).
type Informers struct {
	Resource resourcev1informers.Interface
	Pods     corev1informers.PodInformer
}

// Start registers the map's handlers on the informers; starting them is
// the caller's job.
func (m *Map) Start(ctx context.Context, inf Informers) error {
	type reg struct {
		informer cache.SharedIndexInformer
		set      func(any)
		del      func(any)
	}
	regs := []reg{
		{inf.Resource.ResourceSlices().Informer(), func(o any) { m.SetSlice(o.(*resourcev1.ResourceSlice)) }, func(o any) { m.DeleteSlice(o.(*resourcev1.ResourceSlice).Name) }},
		{inf.Resource.ResourceClaims().Informer(), func(o any) { m.SetClaim(o.(*resourcev1.ResourceClaim)) }, func(o any) { m.DeleteClaim(o.(*resourcev1.ResourceClaim).UID) }},
		{inf.Resource.DeviceTaintRules().Informer(), func(o any) { m.SetRule(o.(*resourcev1.DeviceTaintRule)) }, func(o any) { m.DeleteRule(o.(*resourcev1.DeviceTaintRule).Name) }},
	}
	if inf.Pods != nil {
		regs = append(regs, reg{inf.Pods.Informer(), func(o any) { m.SetPod(o.(*corev1.Pod)) }, func(o any) {
			p := o.(*corev1.Pod)
			m.DeletePod(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}})
	}
	for _, r := range regs {
		_, err := r.informer.AddEventHandler(handler(r.set, r.del))
		if err != nil {
			return fmt.Errorf("devicemap: add event handler: %w", err)
		}
	}
	klog.FromContext(ctx).V(2).Info("Device map watching")
	return nil
}

// handler calls set and del with the informer's objects, tombstones
// unwrapped; objects of other types are ignored.
func handler(set, del func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if obj != nil {
				del(obj)
			}
		},
	}
}

// nodeKey is the row a slice's devices are shown in: its node, else its
// pool (devices reachable from several nodes).
func nodeKey(s *resourcev1.ResourceSlice) string {
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		return *s.Spec.NodeName
	}
	return "pool " + s.Spec.Pool.Name
}

func poolKey(driver, pool string) string { return driver + "/" + pool }

// SetSlice adds or replaces a ResourceSlice.
func (m *Map) SetSlice(s *resourcev1.ResourceSlice) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeSliceLocked(s.Name)
	m.slices[s.Name] = s
	node := nodeKey(s)
	addTo(m.nodeSlices, node, s.Name)
	addTo(m.poolNodes, poolKey(s.Spec.Driver, s.Spec.Pool.Name), node)
	m.dirtyNodes[node] = struct{}{}
	m.scheduleLocked()
}

// DeleteSlice removes a ResourceSlice.
func (m *Map) DeleteSlice(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeSliceLocked(name)
	m.scheduleLocked()
}

func (m *Map) removeSliceLocked(name string) {
	old, ok := m.slices[name]
	if !ok {
		return
	}
	delete(m.slices, name)
	node := nodeKey(old)
	if set := m.nodeSlices[node]; set != nil {
		delete(set, name)
		if len(set) == 0 {
			delete(m.nodeSlices, node)
		}
	}
	// poolNodes keeps the node until no slice of the pool is on it.
	pk := poolKey(old.Spec.Driver, old.Spec.Pool.Name)
	still := false
	for sliceName := range m.nodeSlices[node] {
		if s := m.slices[sliceName]; s != nil && poolKey(s.Spec.Driver, s.Spec.Pool.Name) == pk {
			still = true
		}
	}
	if !still {
		if set := m.poolNodes[pk]; set != nil {
			delete(set, node)
			if len(set) == 0 {
				delete(m.poolNodes, pk)
			}
		}
	}
	m.dirtyNodes[node] = struct{}{}
}

func addTo[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	set := m[k]
	if set == nil {
		set = map[V]struct{}{}
		m[k] = set
	}
	set[v] = struct{}{}
}

// SetClaim adds or replaces a ResourceClaim.
func (m *Map) SetClaim(c *resourcev1.ResourceClaim) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeClaimLocked(c.UID)
	if c.Status.Allocation == nil {
		m.scheduleLocked()
		return
	}
	m.claims[c.UID] = c
	var pods []string
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" {
			pods = append(pods, c.Namespace+"/"+r.Name)
		}
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		key := poolKey(r.Driver, r.Pool) + "/" + r.Device
		if m.holders[key] == nil {
			m.holders[key] = map[types.UID]holder{}
		}
		m.holders[key][c.UID] = holder{
			Claim: c.Namespace + "/" + c.Name, Pods: pods,
			AdminAccess: r.AdminAccess != nil && *r.AdminAccess,
			Share:       r.ShareID != nil || len(r.ConsumedCapacity) > 0,
		}
		m.dirtyPoolLocked(r.Driver, r.Pool)
	}
	m.scheduleLocked()
}

// DeleteClaim removes a ResourceClaim.
func (m *Map) DeleteClaim(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeClaimLocked(uid)
	m.scheduleLocked()
}

func (m *Map) removeClaimLocked(uid types.UID) {
	old, ok := m.claims[uid]
	if !ok {
		return
	}
	delete(m.claims, uid)
	for _, r := range old.Status.Allocation.Devices.Results {
		key := poolKey(r.Driver, r.Pool) + "/" + r.Device
		if set := m.holders[key]; set != nil {
			delete(set, uid)
			if len(set) == 0 {
				delete(m.holders, key)
			}
		}
		m.dirtyPoolLocked(r.Driver, r.Pool)
	}
}

func (m *Map) dirtyPoolLocked(driver, pool string) {
	for node := range m.poolNodes[poolKey(driver, pool)] {
		m.dirtyNodes[node] = struct{}{}
	}
}

// SetRule adds or replaces a DeviceTaintRule; the nodes of the pools
// its old and new selectors pick are redrawn.
func (m *Map) SetRule(r *resourcev1.DeviceTaintRule) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rules[r.Name]; ok {
		m.dirtyRuleLocked(old)
	}
	m.rules[r.Name] = r
	m.dirtyRuleLocked(r)
	m.scheduleLocked()
}

// DeleteRule removes a DeviceTaintRule.
func (m *Map) DeleteRule(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rules[name]; ok {
		m.dirtyRuleLocked(old)
		delete(m.rules, name)
	}
	m.scheduleLocked()
}

// dirtyRuleLocked marks the nodes of every pool a rule's selector may
// pick.
func (m *Map) dirtyRuleLocked(r *resourcev1.DeviceTaintRule) {
	sel := r.Spec.DeviceSelector
	if sel == nil || (sel.Driver == nil && sel.Pool == nil) {
		m.dirtyAll = true
		return
	}
	for pk, nodes := range m.poolNodes {
		driver, pool, _ := strings.Cut(pk, "/")
		if (sel.Driver == nil || *sel.Driver == driver) && (sel.Pool == nil || *sel.Pool == pool) {
			for node := range nodes {
				m.dirtyNodes[node] = struct{}{}
			}
		}
	}
}

// SetPod notes whether a pod waits: not bound, with PodScheduled=False.
func (m *Map) SetPod(p *corev1.Pod) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	var waiting *Pending
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodPending {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				waiting = &Pending{Pod: key.String(), Reason: c.Reason, Message: c.Message}
			}
		}
	}
	if p.DeletionTimestamp != nil {
		waiting = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := m.pending[key]
	switch {
	case waiting == nil && had:
		delete(m.pending, key)
	case waiting != nil && (!had || old != *waiting):
		m.pending[key] = *waiting
	default:
		return
	}
	m.dirtyPending = true
	m.scheduleLocked()
}

// DeletePod forgets a pod.
func (m *Map) DeletePod(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pending[key]; ok {
		delete(m.pending, key)
		m.dirtyPending = true
		m.scheduleLocked()
	}
}

// scheduleLocked starts a flush after flushDelay unless one is due.
func (m *Map) scheduleLocked() {
	if m.flushing || m.manual {
		return
	}
	m.flushing = true
	time.AfterFunc(flushDelay, m.Flush)
}

// Flush recomputes what changed and sends it to every page. It runs by
// itself after changes; tests and benchmarks call it directly.
func (m *Map) Flush() {
	var classes map[string]capacity.ClassTotal
	m.mu.Lock()
	needClasses := m.dirtyClasses && m.tracker != nil
	m.mu.Unlock()
	if needClasses {
		// Outside m.mu: the tracker calls into the map with its own lock
		// held.
		classes = m.tracker.Classes()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushing = false
	msg := message{Type: "update"}
	if m.dirtyAll {
		for node := range m.nodeSlices {
			m.dirtyNodes[node] = struct{}{}
		}
		for node := range m.rows {
			m.dirtyNodes[node] = struct{}{}
		}
		m.dirtyAll = false
	}
	names := make([]string, 0, len(m.dirtyNodes))
	for node := range m.dirtyNodes {
		names = append(names, node)
	}
	sort.Strings(names)
	for _, node := range names {
		if _, ok := m.nodeSlices[node]; !ok {
			if _, shown := m.rows[node]; shown {
				delete(m.rows, node)
				msg.Removed = append(msg.Removed, node)
			}
			continue
		}
		row, err := json.Marshal(m.rowLocked(node))
		if err != nil {
			continue
		}
		m.rows[node] = row
		msg.Nodes = append(msg.Nodes, row)
	}
	clear(m.dirtyNodes)
	if m.dirtyPending {
		m.pendingJSON = m.pendingListLocked()
		m.setPendingMetricLocked()
		msg.Pending = m.pendingJSON
		m.dirtyPending = false
	}
	if needClasses {
		m.dirtyClasses = false
		list := make([]ClassTotal, 0, len(classes))
		for name, c := range classes {
			list = append(list, ClassTotal{Name: name, Devices: c.Devices, Free: c.Free})
		}
		slices.SortFunc(list, func(a, b ClassTotal) int { return strings.Compare(a.Name, b.Name) })
		if data, err := json.Marshal(list); err == nil {
			m.classesJSON = data
			msg.Classes = data
		}
	}
	if len(msg.Nodes) == 0 && len(msg.Removed) == 0 && msg.Pending == nil && msg.Classes == nil {
		return
	}
	m.updates++
	updatesSent.Inc()
	data, err := json.Marshal(msg)
	if err != nil {
		return
	}
	for s := range m.subscribers {
		select {
		case s.ch <- data:
		default:
			// Too far behind: the page reconnects for a new snapshot.
			delete(m.subscribers, s)
			close(s.ch)
		}
	}
}

// Updates is how many updates were sent so far.
func (m *Map) Updates() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updates
}

func (m *Map) pendingListLocked() json.RawMessage {
	list := make([]Pending, 0, len(m.pending))
	for _, p := range m.pending {
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b Pending) int { return strings.Compare(a.Pod, b.Pod) })
	total := len(list)
	if len(list) > maxPending {
		list = list[:maxPending]
	}
	data, _ := json.Marshal(struct {
		Total int       `json:"total"`
		Pods  []Pending `json:"pods"`
	}{total, list})
	return data
}

// rowLocked computes one node's row.
func (m *Map) rowLocked(node string) Row {
	row := Row{Node: node}
	names := make([]string, 0, len(m.nodeSlices[node]))
	for name := range m.nodeSlices[node] {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := m.slices[name]
		pk := poolKey(s.Spec.Driver, s.Spec.Pool.Name)
		// Counter sets in use by allocated devices of this slice: the
		// other partitions of the same memory are "partition in use".
		used := map[string][]string{}
		for _, d := range s.Spec.Devices {
			if len(m.holders[pk+"/"+d.Name]) == 0 {
				continue
			}
			for _, c := range d.ConsumesCounters {
				used[c.CounterSet] = append(used[c.CounterSet], d.Name)
			}
		}
		for _, d := range s.Spec.Devices {
			row.Devices = append(row.Devices, m.deviceLocked(s, pk, &d, used))
		}
	}
	return row
}

func (m *Map) deviceLocked(s *resourcev1.ResourceSlice, pk string, d *resourcev1.Device, used map[string][]string) Device {
	dev := Device{ID: pk + "/" + d.Name, Name: d.Name, State: StateFree}
	noSchedule, noExecute := false, false
	addTaint := func(t resourcev1.DeviceTaint, from string) {
		if m.ownerMark != "" && t.Key == m.ownerMark {
			dev.Owned = true
			return
		}
		switch t.Effect {
		case resourcev1.DeviceTaintEffectNoExecute:
			noExecute = true
		case resourcev1.DeviceTaintEffectNoSchedule:
			noSchedule = true
		}
		text := t.Key
		if t.Value != "" {
			text += "=" + t.Value
		}
		dev.Taints = append(dev.Taints, text+":"+string(t.Effect)+from)
	}
	for _, t := range d.Taints {
		addTaint(t, "")
	}
	ruleNames := make([]string, 0, len(m.rules))
	for name := range m.rules {
		ruleNames = append(ruleNames, name)
	}
	sort.Strings(ruleNames)
	for _, name := range ruleNames {
		r := m.rules[name]
		if selects(r.Spec.DeviceSelector, s.Spec.Driver, s.Spec.Pool.Name, d.Name) {
			addTaint(r.Spec.Taint, " (DeviceTaintRule "+name+")")
		}
	}
	allocated, admin, shared := false, false, false
	hs := m.holders[dev.ID]
	uids := make([]types.UID, 0, len(hs))
	for uid := range hs {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		h := hs[uid]
		dev.Claims = append(dev.Claims, Claim{Name: h.Claim, Pods: h.Pods, AdminAccess: h.AdminAccess})
		if h.AdminAccess {
			admin = true
		} else {
			allocated = true
		}
		shared = shared || h.Share
	}
	if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations && allocated {
		shared = true
	}
	if !allocated && !admin {
		for _, c := range d.ConsumesCounters {
			for _, other := range used[c.CounterSet] {
				if other != d.Name && !slices.Contains(dev.Partition, other) {
					dev.Partition = append(dev.Partition, other)
				}
			}
		}
	}
	switch {
	case noExecute:
		dev.State = StateNoExecute
	case noSchedule:
		dev.State = StateNoSchedule
	case shared:
		dev.State = StateShared
	case allocated:
		dev.State = StateAllocated
	case admin:
		dev.State = StateAdminAccess
	case len(dev.Partition) > 0:
		dev.State = StatePartition
	}
	return dev
}

// selects reports whether a DeviceTaintRule's selector picks a device;
// fields left out match every device.
func selects(sel *resourcev1.DeviceTaintSelector, driver, pool, device string) bool {
	if sel == nil {
		return true
	}
	return (sel.Driver == nil || *sel.Driver == driver) &&
		(sel.Pool == nil || *sel.Pool == pool) &&
		(sel.Device == nil || *sel.Device == device)
}

// snapshotLocked is every row, the pending pods and the class totals, as
// one message. It is written by hand: the rows are encoded already, and
// json.Marshal would check and copy each of them again.
func (m *Map) snapshotLocked() []byte {
	names := make([]string, 0, len(m.rows))
	size := 64 + len(m.pendingJSON) + len(m.classesJSON)
	for node, row := range m.rows {
		names = append(names, node)
		size += len(row) + 1
	}
	sort.Strings(names)
	data := make([]byte, 0, size)
	data = append(data, `{"type":"snapshot","nodes":[`...)
	for i, node := range names {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, m.rows[node]...)
	}
	data = append(data, `],"pending":`...)
	data = append(data, m.pendingJSON...)
	data = append(data, `,"classes":`...)
	data = append(data, m.classesJSON...)
	return append(data, '}')
}

// Handler serves the page under Path: the embedded assets, and the event
// stream at EventsPath, until stop is closed.
func (m *Map) Handler(stop <-chan struct{}) http.Handler {
	static, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix(Path, http.FileServer(http.FS(static)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the device map is read-only: GET only", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case EventsPath:
			m.serveEvents(w, r, stop)
		case strings.TrimSuffix(Path, "/"):
			http.Redirect(w, r, "devicemap/", http.StatusFound)
		default:
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		}
	})
}

// serveEvents streams the snapshot and then the updates as server-sent
// events.
func (m *Map) serveEvents(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	s := &subscriber{ch: make(chan []byte, subscriberBuffer)}
	m.mu.Lock()
	snapshot := m.snapshotLocked()
	m.subscribers[s] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.subscribers, s)
		m.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !writeEvent(w, snapshot) {
		return
	}
	flusher.Flush()
	keepAlive := time.NewTicker(30 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case data, ok := <-s.ch:
			if !ok {
				return
			}
			if !writeEvent(w, data) {
				return
			}
		case <-keepAlive.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-stop:
			return
		}
		flusher.Flush()
	}
}

func writeEvent(w http.ResponseWriter, data []byte) bool {
	if _, err := w.Write([]byte("data: ")); err != nil {
		return false
	}
	if _, err := w.Write(data); err != nil {
		return false
	}
	_, err := w.Write([]byte("\n\n"))
	return err == nil
}
