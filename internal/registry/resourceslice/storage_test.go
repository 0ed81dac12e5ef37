package resourceslice

import (
	"context"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

// newTestREST returns the storage on a fresh embedded etcd, encoding v1
// as the server does.
func newTestREST(t *testing.T) *REST {
	t.Helper()
	scheme := apitest.Scheme()
	storage, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	return storage
}

func newSlice(name, node, driver, pool string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node),
			Pool:    resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "dev-0"}},
		},
	}
}

func TestStorageLifecycle(t *testing.T) {
	storage := newTestREST(t)
	ctx := genericapirequest.WithNamespace(context.Background(), "")

	watcher, err := storage.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	obj, err := storage.Create(ctx, newSlice("a", "node-1", "one.example.com", "pool-a"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*resourceapi.ResourceSlice)
	if created.Generation != 1 || created.UID == "" {
		t.Errorf("created slice: generation %d, uid %q", created.Generation, created.UID)
	}
	if event := <-watcher.ResultChan(); event.Type != watch.Added {
		t.Errorf("first event %s, want ADDED", event.Type)
	}

	update := created.DeepCopy()
	update.Spec.Devices = append(update.Spec.Devices, resourceapi.Device{Name: "dev-1"})
	obj, _, err = storage.Update(ctx, "a", rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*resourceapi.ResourceSlice).Generation; got != 2 {
		t.Errorf("generation after spec update %d, want 2", got)
	}
	if event := <-watcher.ResultChan(); event.Type != watch.Modified {
		t.Errorf("second event %s, want MODIFIED", event.Type)
	}

	if _, _, err := storage.Delete(ctx, "a", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if event := <-watcher.ResultChan(); event.Type != watch.Deleted {
		t.Errorf("third event %s, want DELETED", event.Type)
	}
}

func TestStorageFieldSelectors(t *testing.T) {
	storage := newTestREST(t)
	ctx := genericapirequest.WithNamespace(context.Background(), "")
	for _, slice := range []*resourceapi.ResourceSlice{
		newSlice("a", "node-1", "one.example.com", "pool-a"),
		newSlice("b", "node-2", "one.example.com", "pool-b"),
		newSlice("c", "node-2", "two.example.com", "pool-c"),
	} {
		if _, err := storage.Create(ctx, slice, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string][]string{
		"spec.nodeName=node-2":                             {"b", "c"},
		"spec.driver=one.example.com":                      {"a", "b"},
		"spec.pool.name=pool-c":                            {"c"},
		"spec.nodeName=node-2,spec.driver=one.example.com": {"b"},
		"spec.nodeName=node-3":                             nil,
	}
	for selector, want := range tests {
		t.Run(selector, func(t *testing.T) {
			sel, err := fields.ParseSelector(selector)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := storage.List(ctx, &metainternalversion.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, item := range obj.(*resourceapi.ResourceSliceList).Items {
				got = append(got, item.Name)
			}
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("got %v, want %v", got, want)
				}
			}
		})
	}
}

func TestTable(t *testing.T) {
	storage := newTestREST(t)
	slice := newSlice("a", "node-1", "one.example.com", "pool-a")
	slice.CreationTimestamp = metav1.Now()
	table, err := storage.ConvertToTable(context.Background(), &resourceapi.ResourceSliceList{Items: []resourceapi.ResourceSlice{*slice}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, column := range table.ColumnDefinitions {
		headers = append(headers, column.Name)
	}
	wantHeaders := []string{"Name", "Node", "Driver", "Pool", "Devices", "Age", "Generation"}
	if len(headers) != len(wantHeaders) {
		t.Fatalf("headers %v, want %v", headers, wantHeaders)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[0] != "a" || cells[1] != "node-1" || cells[2] != "one.example.com" || cells[3] != "pool-a" || cells[4] != int64(1) {
		t.Errorf("row %v", cells)
	}
	if got := storage.ShortNames(); len(got) != 1 || got[0] != "rsl" {
		t.Errorf("short names %v", got)
	}
	if got := storage.Categories(); len(got) != 1 || got[0] != "dra" {
		t.Errorf("categories %v", got)
	}
}
