package resourcepool

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/allocator/capacity"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

func slice(driver, node string, devices ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: new(node),
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
	}
	return s
}

func allocated(uid, driver, pool, device string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "r", Driver: driver, Pool: pool, Device: device}}}}
	return c
}

func TestStorage(t *testing.T) {
	ctx := context.Background()
	tr := capacity.New(allocator.New(allocator.Options{}))
	r := NewREST(tr)
	tr.SetSlice(ctx, slice("gpu.example.com", "node-a", "g0", "g1"))
	tr.SetSlice(ctx, slice("gpu.example.com", "node-b", "g0"))
	tr.SetSlice(ctx, slice("nic.example.com", "node-a", "n0"))

	obj, err := r.Get(ctx, "gpu.example.com:node-a", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*resourceapi.ResourcePoolUsage).Status.Devices; got.Total != 2 || got.Free != 2 {
		t.Errorf("node-a gpus: %+v", got)
	}
	if _, err := r.Get(ctx, "nope", &metav1.GetOptions{}); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `"<driver>:<pool>"`) {
		t.Errorf("get of a missing pool: %v, want NotFound saying how pools are named", err)
	}
	if _, err := r.Get(ctx, "gpu.example.com:node-c", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing pool: %v, want NotFound", err)
	}

	for _, tc := range []struct {
		selector string
		want     []string
		bad      bool
	}{
		{"", []string{"gpu.example.com:node-a", "gpu.example.com:node-b", "nic.example.com:node-a"}, false},
		{"status.driver=gpu.example.com", []string{"gpu.example.com:node-a", "gpu.example.com:node-b"}, false},
		{"status.nodeName=node-a", []string{"gpu.example.com:node-a", "nic.example.com:node-a"}, false},
		{"status.nodeName=node-a,status.driver=nic.example.com", []string{"nic.example.com:node-a"}, false},
		{"spec.driver=x", nil, true},
	} {
		opts := &metainternalversion.ListOptions{}
		if tc.selector != "" {
			opts.FieldSelector = fields.ParseSelectorOrDie(tc.selector)
		}
		obj, err := r.List(ctx, opts)
		if tc.bad {
			if !apierrors.IsBadRequest(err) {
				t.Errorf("%q: %v, want a bad request", tc.selector, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range obj.(*resourceapi.ResourcePoolUsageList).Items {
			names = append(names, p.Name)
		}
		if len(names) != len(tc.want) {
			t.Errorf("%q: %v, want %v", tc.selector, names, tc.want)
			continue
		}
		for i := range names {
			if names[i] != tc.want[i] {
				t.Errorf("%q: %v, want %v", tc.selector, names, tc.want)
			}
		}
	}

	// A watch from the list's resource version, restricted to node-a's gpus,
	// sees the allocation and the release and nothing of other pools.
	list, _ := r.List(ctx, &metainternalversion.ListOptions{})
	rv := list.(*resourceapi.ResourcePoolUsageList).ResourceVersion
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: rv, FieldSelector: fields.ParseSelectorOrDie("metadata.name=gpu.example.com:node-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	tr.SetClaim(ctx, allocated("c1", "gpu.example.com", "node-b", "g0"))
	tr.SetClaim(ctx, allocated("c2", "gpu.example.com", "node-a", "g1"))
	tr.DeleteClaim(ctx, "c2")
	for _, wantFree := range []int32{1, 2} {
		select {
		case ev := <-w.ResultChan():
			p := ev.Object.(*resourceapi.ResourcePoolUsage)
			if ev.Type != watch.Modified || p.Name != "gpu.example.com:node-a" || p.Status.Devices.Free != wantFree {
				t.Errorf("event %s %s free %d, want MODIFIED gpu.example.com:node-a free %d", ev.Type, p.Name, p.Status.Devices.Free, wantFree)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
	}

	// A watch without a resource version starts with every pool.
	w2, err := r.Watch(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	for range 3 {
		if ev := <-w2.ResultChan(); ev.Type != watch.Added {
			t.Errorf("initial event %s", ev.Type)
		}
	}
	tr.DeleteSlice(ctx, "node-b-gpu.example.com")
	if ev := <-w2.ResultChan(); ev.Type != watch.Deleted || ev.Object.(*resourceapi.ResourcePoolUsage).Name != "gpu.example.com:node-b" {
		t.Errorf("after the slice's deletion: %s %s", ev.Type, ev.Object.(*resourceapi.ResourcePoolUsage).Name)
	}

	table, err := r.ConvertToTable(ctx, list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.ColumnDefinitions) != 7 || len(table.Rows) != 3 {
		t.Fatalf("table: %d columns, %d rows", len(table.ColumnDefinitions), len(table.Rows))
	}
	if row := table.Rows[0].Cells; row[1] != "gpu.example.com" || row[2] != "node-a" || row[3] != int64(2) || row[5] != int64(2) {
		t.Errorf("first row %v", row)
	}
}

// TestWatchBookmarkOnlyWhenAsked: the initial-events-end bookmark goes
// only to watches that allow bookmarks. With WatchList on, the API server
// defaults a plain watch to sendInitialEvents=true without bookmarks, and
// its handler panics on an initial-events-end bookmark for such a watch.
func TestWatchBookmarkOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	tr := capacity.New(allocator.New(allocator.Options{}))
	r := NewREST(tr)
	tr.SetSlice(ctx, slice("gpu.example.com", "node-a", "g0"))
	for _, bookmarks := range []bool{false, true} {
		w, err := r.Watch(ctx, &metainternalversion.ListOptions{SendInitialEvents: new(true), AllowWatchBookmarks: bookmarks,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		if ev := <-w.ResultChan(); ev.Type != watch.Added {
			t.Errorf("bookmarks %v: first event %s, want ADDED", bookmarks, ev.Type)
		}
		select {
		case ev := <-w.ResultChan():
			if !bookmarks || ev.Type != watch.Bookmark {
				t.Errorf("bookmarks %v: second event %s", bookmarks, ev.Type)
			}
		default:
			if bookmarks {
				t.Error("no initial-events-end bookmark although the watch allows bookmarks")
			}
		}
		w.Stop()
	}
}

// TestPoolNamesAreUnique: every valid (driver, pool) pair gets its own
// object name, so no pool hides another in the view, and the name is found
// from the driver and pool name alone.
func TestPoolNamesAreUnique(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b allocator.PoolID
	}{
		{"slash and double dash", allocator.PoolID{Driver: "gpu.example.com", Pool: "x/y"}, allocator.PoolID{Driver: "gpu.example.com", Pool: "x--y"}},
		{"dot moves from pool to driver", allocator.PoolID{Driver: "c.example.com", Pool: "a.b"}, allocator.PoolID{Driver: "b.c.example.com", Pool: "a"}},
		{"slash at a dot", allocator.PoolID{Driver: "example.com", Pool: "a/b.c"}, allocator.PoolID{Driver: "example.com", Pool: "a.b/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tr := capacity.New(allocator.New(allocator.Options{}))
			r := NewREST(tr)
			for i, id := range []allocator.PoolID{tc.a, tc.b} {
				s := slice(id.Driver, "node", "d0")
				s.Name = fmt.Sprintf("slice-%d", i)
				s.Spec.Pool.Name = id.Pool
				tr.SetSlice(ctx, s)
			}
			if Name(tc.a) == Name(tc.b) {
				t.Errorf("pools %s and %s are both named %q", tc.a, tc.b, Name(tc.a))
			}
			obj, err := r.List(ctx, &metainternalversion.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(obj.(*resourceapi.ResourcePoolUsageList).Items); n != 2 {
				t.Errorf("%d pools listed, want 2 (%s and %s)", n, tc.a, tc.b)
			}
			for _, id := range []allocator.PoolID{tc.a, tc.b} {
				obj, err := r.Get(ctx, Name(id), &metav1.GetOptions{})
				if err != nil {
					t.Errorf("get %q of pool %s: %v", Name(id), id, err)
					continue
				}
				if st := obj.(*resourceapi.ResourcePoolUsage).Status; st.Driver != id.Driver || st.Pool != id.Pool {
					t.Errorf("get %q: pool %s/%s, want %s", Name(id), st.Driver, st.Pool, id)
				}
			}
		})
	}
}

// TestQuantitiesAsWritten: shared counters and consumable capacities show
// in the format the slice wrote them (80Gi stays 80Gi, not 85899345920),
// total and used alike.
func TestQuantitiesAsWritten(t *testing.T) {
	ctx := context.Background()
	tr := capacity.New(allocator.New(allocator.Options{}))
	r := NewREST(tr)
	// A pool of two slices: the counters in one, the devices in the other.
	counters := slice("gpu.example.com", "node-a")
	counters.Name += "-counters"
	counters.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "mem", Counters: map[string]resourceapi.Counter{
		"bytes": {Value: resource.MustParse("80Gi")},
		"cores": {Value: resource.MustParse("2k")},
	}}}
	s := slice("gpu.example.com", "node-a", "g0", "g1", "nic")
	for _, s := range []*resourceapi.ResourceSlice{counters, s} {
		s.Spec.Pool.ResourceSliceCount = 2
	}
	for i := range 2 {
		s.Spec.Devices[i].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "mem", Counters: map[string]resourceapi.Counter{
			"bytes": {Value: resource.MustParse("40Gi")},
			"cores": {Value: resource.MustParse("1k")},
		}}}
	}
	s.Spec.Devices[2].AllowMultipleAllocations = new(true)
	s.Spec.Devices[2].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {Value: resource.MustParse("10Gi")}}
	tr.SetSlice(ctx, counters)
	tr.SetSlice(ctx, s)
	tr.SetClaim(ctx, allocated("c1", "gpu.example.com", "node-a", "g0"))

	obj, err := r.Get(ctx, Name(allocator.PoolID{Driver: "gpu.example.com", Pool: "node-a"}), &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := obj.(*resourceapi.ResourcePoolUsage).Status
	got := map[string]string{}
	for _, c := range st.SharedCounters {
		got["counter "+c.CounterSet+"/"+c.Counter] = c.Used.String() + " of " + c.Total.String()
	}
	for _, c := range st.Capacity {
		got["capacity "+string(c.Name)] = c.Used.String() + " of " + c.Total.String()
	}
	for what, want := range map[string]string{
		"counter mem/bytes":  "40Gi of 80Gi",
		"counter mem/cores":  "1k of 2k",
		"capacity bandwidth": "0 of 10Gi",
	} {
		if got[what] != want {
			t.Errorf("%s: %q, want %q", what, got[what], want)
		}
	}
}
