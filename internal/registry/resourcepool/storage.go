// Package resourcepool serves resourcepools: a read-only view of every
// resource pool's usage, computed by allocator/capacity from the server's
// own ResourceSlices, ResourceClaims, DeviceClasses and DeviceTaintRules
// and never written to etcd. It supports get, list and watch, with field
// selectors on status.driver and status.nodeName.
package resourcepool

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/capacity"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/registry/internal/table"
)

// watchBuffer is how many events a watcher may fall behind before it is
// closed; the client then lists again.
const watchBuffer = 1000

// REST serves the pools of a capacity.Tracker.
type REST struct {
	tracker *capacity.Tracker

	mu       sync.RWMutex
	pools    map[string]*resourceapi.ResourcePoolUsage // by name
	deleted  map[string]uint64                         // name -> revision of the deletion
	revision uint64
	watchers map[*watcher]struct{}
}

var (
	_ rest.Storage              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.TableConvertor       = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

// NewREST returns the storage of resourcepools; it shows what the tracker
// counts, from the tracker's next change on.
func NewREST(tracker *capacity.Tracker) *REST {
	r := &REST{tracker: tracker, pools: map[string]*resourceapi.ResourcePoolUsage{}, deleted: map[string]uint64{}, watchers: map[*watcher]struct{}{}}
	tracker.OnChange(r.apply)
	return r
}

// Tracker is what the storage shows.
func (r *REST) Tracker() *capacity.Tracker { return r.tracker }

// Name is the object name of a pool: "<driver>:<pool>", each "/" of the
// pool name written as ":". Neither a driver name nor a pool name may hold
// a ":", so the driver is what comes before the first ":" and every valid
// (driver, pool) pair has a name of its own.
func Name(id allocator.PoolID) string {
	return id.Driver + ":" + strings.ReplaceAll(id.Pool, "/", ":")
}

func (r *REST) apply(c capacity.Change) {
	obj := toAPI(c.Pool, c.Revision)
	name := obj.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revision = c.Revision
	ev := watch.Event{Type: watch.Modified, Object: obj}
	switch {
	case c.Deleted:
		delete(r.pools, name)
		r.deleted[name] = c.Revision
		ev.Type = watch.Deleted
	case r.pools[name] == nil:
		ev.Type = watch.Added
		r.pools[name] = obj
		delete(r.deleted, name)
	default:
		r.pools[name] = obj
	}
	for w := range r.watchers {
		if !w.matches(obj) {
			continue
		}
		select {
		case w.ch <- ev:
		default:
			// Too far behind: end the watch, the client lists again.
			delete(r.watchers, w)
			close(w.ch)
		}
	}
}

func toAPI(u allocator.PoolUsage, revision uint64) *resourceapi.ResourcePoolUsage {
	p := &resourceapi.ResourcePoolUsage{
		ObjectMeta: metav1.ObjectMeta{Name: Name(u.ID), ResourceVersion: strconv.FormatUint(revision, 10)},
		Status: resourceapi.ResourcePoolUsageStatus{
			Driver: u.ID.Driver, Pool: u.ID.Pool, Generation: u.Generation, Complete: u.Complete, Problem: u.Problem,
			NodeName: u.NodeName, AllNodes: u.AllNodes, NodeSelector: u.NodeSelector, PerDeviceNodeSelection: u.PerDevice,
			Devices: resourceapi.ResourcePoolDeviceCounts{
				Total: int32(u.Devices), Allocated: int32(u.Allocated), AdminAccess: int32(u.AdminAccess),
				Tainted: int32(u.Tainted), TaintedNoSchedule: int32(u.TaintedNoSchedule), TaintedNoExecute: int32(u.TaintedNoExecute),
				Unusable: int32(u.Unusable), Free: int32(u.Free),
			},
		},
	}
	for _, c := range u.Counters {
		p.Status.SharedCounters = append(p.Status.SharedCounters, resourceapi.ResourcePoolCounter{CounterSet: c.CounterSet, Counter: c.Counter, Used: c.Used, Total: c.Total})
	}
	for _, c := range u.Capacities {
		p.Status.Capacity = append(p.Status.Capacity, resourceapi.ResourcePoolCapacity{Name: resourceapi.QualifiedName(c.Name), Used: c.Used, Total: c.Total})
	}
	for _, c := range u.Classes {
		if c.Devices == 0 {
			continue
		}
		p.Status.Classes = append(p.Status.Classes, resourceapi.ResourcePoolClass{Name: c.Class, Devices: int32(c.Devices), Free: int32(c.Free)})
	}
	return p
}

// New implements rest.Storage.
func (r *REST) New() runtime.Object { return &resourceapi.ResourcePoolUsage{} }

// Destroy implements rest.Storage.
func (r *REST) Destroy() {}

// NamespaceScoped implements rest.Scoper: pools are cluster-scoped.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (r *REST) GetSingularName() string { return "resourcepool" }

// NewList implements rest.Lister.
func (r *REST) NewList() runtime.Object { return &resourceapi.ResourcePoolUsageList{} }

// Get implements rest.Getter.
func (r *REST) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.pools[name]
	if !ok {
		err := apierrors.NewNotFound(resourceapi.Resource("resourcepools"), name)
		if !strings.Contains(name, ":") {
			// Perhaps a name of the earlier "<pool>.<driver>" form.
			err.ErrStatus.Message += `: pools are named "<driver>:<pool>", each "/" of the pool name written ":"`
		}
		return nil, err
	}
	return p.DeepCopy(), nil
}

// fieldSet is what field selectors of pools match on.
func fieldSet(p *resourceapi.ResourcePoolUsage) fields.Set {
	return fields.Set{
		"metadata.name":                          p.Name,
		resourceapi.ResourcePoolSelectorDriver:   p.Status.Driver,
		resourceapi.ResourcePoolSelectorNodeName: p.Status.NodeName,
	}
}

type filter struct {
	labels labels.Selector
	fields fields.Selector
}

func newFilter(opts *metainternalversion.ListOptions) filter {
	f := filter{labels: labels.Everything(), fields: fields.Everything()}
	if opts != nil && opts.LabelSelector != nil {
		f.labels = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		f.fields = opts.FieldSelector
	}
	return f
}

func (f filter) matches(p *resourceapi.ResourcePoolUsage) bool {
	return f.labels.Matches(labels.Set(p.Labels)) && f.fields.Matches(fieldSet(p))
}

// checkFields rejects field selectors on fields pools don't have.
func checkFields(opts *metainternalversion.ListOptions) error {
	if opts == nil || opts.FieldSelector == nil {
		return nil
	}
	for _, req := range opts.FieldSelector.Requirements() {
		switch req.Field {
		case "metadata.name", resourceapi.ResourcePoolSelectorDriver, resourceapi.ResourcePoolSelectorNodeName:
		default:
			return apierrors.NewBadRequest(fmt.Sprintf("field selector %q: resourcepools can be selected by metadata.name, %s and %s",
				req.Field, resourceapi.ResourcePoolSelectorDriver, resourceapi.ResourcePoolSelectorNodeName))
		}
	}
	return nil
}

// List implements rest.Lister. The list is always complete (no pages).
func (r *REST) List(_ context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := checkFields(opts); err != nil {
		return nil, err
	}
	f := newFilter(opts)
	r.mu.RLock()
	defer r.mu.RUnlock()
	list := &resourceapi.ResourcePoolUsageList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(r.revision, 10)}}
	for _, p := range r.pools {
		if f.matches(p) {
			list.Items = append(list.Items, *p.DeepCopy())
		}
	}
	slices.SortFunc(list.Items, func(a, b resourceapi.ResourcePoolUsage) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

type watcher struct {
	filter
	ch chan watch.Event
	r  *REST
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

func (w *watcher) Stop() {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if _, ok := w.r.watchers[w]; ok {
		delete(w.r.watchers, w)
		close(w.ch)
	}
}

// Watch implements rest.Watcher. Without a resource version (or "0") it
// starts with every pool as ADDED; from a resource version it sends the
// current state of every pool changed since, then every change.
func (r *REST) Watch(_ context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	if err := checkFields(opts); err != nil {
		return nil, err
	}
	var since uint64
	initial := true
	if opts != nil && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		v, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: not a resource version of resourcepools", opts.ResourceVersion))
		}
		since, initial = v, false
	}
	if opts != nil && opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
		if initial {
			since = 0
		}
	}
	// The initial-events-end bookmark only goes to clients that asked for
	// bookmarks: with WatchList on, the API server defaults a plain watch
	// to sendInitialEvents=true without them, and its watch handler has
	// nothing to call on that bookmark for such a watch (it panics).
	bookmark := opts != nil && opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.AllowWatchBookmarks
	w := &watcher{filter: newFilter(opts), r: r}
	r.mu.Lock()
	defer r.mu.Unlock()
	var backlog []watch.Event
	names := make([]string, 0, len(r.pools))
	for name := range r.pools {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := r.pools[name]
		rv, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
		if !w.matches(p) || (!initial && rv <= since) {
			continue
		}
		t := watch.Added
		if !initial {
			t = watch.Modified
		}
		backlog = append(backlog, watch.Event{Type: t, Object: p})
	}
	if !initial {
		for name, rv := range r.deleted {
			if rv > since {
				backlog = append(backlog, watch.Event{Type: watch.Deleted, Object: &resourceapi.ResourcePoolUsage{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: strconv.FormatUint(rv, 10)}}})
			}
		}
	}
	if bookmark {
		backlog = append(backlog, watch.Event{Type: watch.Bookmark, Object: &resourceapi.ResourcePoolUsage{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.FormatUint(r.revision, 10),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}}})
	}
	w.ch = make(chan watch.Event, len(backlog)+watchBuffer)
	for _, ev := range backlog {
		w.ch <- ev
	}
	r.watchers[w] = struct{}{}
	return w, nil
}

var tableConvertor = table.Convertor[*resourceapi.ResourcePoolUsage]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Driver", Type: "string", Description: "Driver publishing the pool."},
		{Name: "Node", Type: "string", Description: "Node of the pool's devices; <all> or <selector> when not on one node."},
		{Name: "Total", Type: "integer", Description: "Devices in the pool's newest generation."},
		{Name: "Allocated", Type: "integer", Description: "Devices with an allocation other than admin access."},
		{Name: "Free", Type: "integer", Description: "Devices that can take one more allocation without tolerations."},
		{Name: "Tainted", Type: "integer", Description: "Devices with a NoSchedule or NoExecute taint."},
	},
	Row: func(p *resourceapi.ResourcePoolUsage) []interface{} {
		node := p.Status.NodeName
		switch {
		case node != "":
		case p.Status.AllNodes:
			node = "<all>"
		case p.Status.NodeSelector != nil:
			node = "<selector>"
		case p.Status.PerDeviceNodeSelection:
			node = "<per device>"
		}
		d := p.Status.Devices
		return []interface{}{p.Name, p.Status.Driver, node, int64(d.Total), int64(d.Allocated), int64(d.Free), int64(d.Tainted)}
	},
}

// ConvertToTable implements rest.TableConvertor.
func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return tableConvertor.ConvertToTable(ctx, object, tableOptions)
}
