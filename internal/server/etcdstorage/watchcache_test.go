package etcdstorage

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestWatchCacheSharesDeviceMaps: the watch cache of resourceslices keeps
// one attribute map and one capacity map for identical devices, whether
// it listed the slice when it started or watched it arrive; what is read
// from etcd itself, which a request may change, is never shared.
func TestWatchCacheSharesDeviceMaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, codecs := startTestEtcd(ctx, t)
	slices := schema.GroupResource{Group: resourceapi.GroupName, Resource: "resourceslices"}
	config := storagebackend.NewDefaultConfig("/registry", codecs.LegacyCodec(resourcev1.SchemeGroupVersion))
	getter := e.InProcessRESTOptions(staticRESTOptions{config.ForResource(slices)}, func(schema.GroupResource) bool { return true }, nil)
	opts, err := getter.GetRESTOptions(slices, &resourceapi.ResourceSlice{})
	if err != nil {
		t.Fatal(err)
	}
	newStore := func(decorator func() (storage.Interface, func(), error)) storage.Interface {
		store, destroy, err := decorator()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(destroy)
		return store
	}
	decorate := func(cached bool) func() (storage.Interface, func(), error) {
		return func() (storage.Interface, func(), error) {
			s, d, err := cachingDecorator(e.inProcess.rawStorage, cached, nil)(opts.StorageConfig, "/resourceslices",
				func(obj runtime.Object) (string, error) { return storage.NoNamespaceKeyFunc("/resourceslices/", obj) },
				func() runtime.Object { return &resourceapi.ResourceSlice{} }, func() runtime.Object { return &resourceapi.ResourceSliceList{} },
				storage.DefaultClusterScopedAttr, nil, nil)
			return s, func() { d() }, err
		}
	}
	slice := func(name string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: "gpu.example.com", NodeName: ptr.To(name), Pool: resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{
					Name:       "gpu-0",
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("a100")}},
					Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
				}},
			},
		}
	}
	create := func(store storage.Interface, name string) string {
		created := &resourceapi.ResourceSlice{}
		if err := store.Create(ctx, "/resourceslices/"+name, slice(name), created, 0); err != nil {
			t.Fatal(err)
		}
		return created.ResourceVersion
	}

	// listed is in etcd before the cache starts, watched arrives after.
	create(newStore(decorate(false)), "listed")
	cached := newStore(decorate(true))
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return cached.ReadinessCheck() == nil, nil
	}); err != nil {
		t.Fatalf("watch cache not ready: %v", cached.ReadinessCheck())
	}
	rv := create(cached, "watched")

	get := func(name, resourceVersion string) *resourceapi.ResourceSlice {
		got := &resourceapi.ResourceSlice{}
		// At a resource version the cache serves the read with its own
		// object's fields (a shallow copy); without one etcd does.
		if err := cached.Get(ctx, "/resourceslices/"+name, storage.GetOptions{ResourceVersion: resourceVersion}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	listed, watched := get("listed", rv), get("watched", rv)
	if l, w := listed.Spec.Devices[0], watched.Spec.Devices[0]; !same(l.Attributes, w.Attributes) || !same(l.Capacity, w.Capacity) {
		t.Errorf("the watch cache keeps identical devices' maps twice")
	}
	fromEtcd := get("watched", "")
	if e, w := fromEtcd.Spec.Devices[0], watched.Spec.Devices[0]; same(e.Attributes, w.Attributes) || same(e.Capacity, w.Capacity) {
		t.Errorf("a slice read from etcd has the cache's shared maps")
	}
}
