package etcdstorage

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// staticRESTOptions stands in for the generic storage factory.
type staticRESTOptions struct {
	config *storagebackend.ConfigForResource
}

func (o staticRESTOptions) GetRESTOptions(schema.GroupResource, runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{StorageConfig: o.config, Decorator: generic.UndecoratedStorage}, nil
}

// TestInProcessStorage: storage made by InProcessRESTOptions writes,
// reads and watches with and without a watch cache while the embedded
// etcd's client listener is closed, so it does not go through it.
func TestInProcessStorage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, codecs := startTestEtcd(ctx, t)
	for _, l := range e.etcd.Clients {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	config := storagebackend.NewDefaultConfig("/registry", codecs.LegacyCodec(corev1.SchemeGroupVersion))
	pods := schema.GroupResource{Resource: "pods"}
	getter := e.InProcessRESTOptions(staticRESTOptions{config.ForResource(pods)}, func(schema.GroupResource) bool { return true }, nil)

	for _, tc := range []struct {
		name   string
		cached bool
	}{{"raw", false}, {"cached", true}} {
		cached := tc.cached
		t.Run(tc.name, func(t *testing.T) {
			opts, err := getter.GetRESTOptions(pods, &corev1.Pod{})
			if err != nil {
				t.Fatal(err)
			}
			decorator := opts.Decorator
			if !cached {
				decorator = cachingDecorator(e.inProcess.rawStorage, false, nil)
			}
			store, destroy, err := decorator(opts.StorageConfig, "/pods",
				func(obj runtime.Object) (string, error) {
					return storage.NamespaceKeyFunc("/pods/", obj)
				},
				func() runtime.Object { return &corev1.Pod{} }, func() runtime.Object { return &corev1.PodList{} },
				storage.DefaultNamespaceScopedAttr, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer destroy()
			// A watch cache serves once it has read everything.
			if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
				return store.ReadinessCheck() == nil, nil
			}); err != nil {
				t.Fatalf("storage not ready: %v", store.ReadinessCheck())
			}

			w, err := store.Watch(ctx, "/pods/"+tc.name, storage.ListOptions{Predicate: storage.Everything, Recursive: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: tc.name}}
			key := "/pods/" + tc.name + "/p"
			created := &corev1.Pod{}
			if err := store.Create(ctx, key, pod, created, 0); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Pod{}
			if err := store.Get(ctx, key, storage.GetOptions{ResourceVersion: created.ResourceVersion}, got); err != nil {
				t.Fatal(err)
			}
			if got.Name != pod.Name || got.ResourceVersion != created.ResourceVersion {
				t.Errorf("read back %s at %s, want %s at %s", got.Name, got.ResourceVersion, pod.Name, created.ResourceVersion)
			}
			select {
			case event := <-w.ResultChan():
				object, err := meta.Accessor(event.Object)
				if err != nil {
					t.Fatalf("watch event %s %T: %v", event.Type, event.Object, err)
				}
				if event.Type != watch.Added || object.GetName() != pod.Name {
					t.Errorf("watch event %s %s, want ADDED %s", event.Type, object.GetName(), pod.Name)
				}
			case <-ctx.Done():
				t.Fatal("no watch event")
			}
			if cached {
				expectInitialEvents(ctx, t, store, "/pods/"+tc.name, pod.Name)
			}
		})
	}
}

// expectInitialEvents: a watch that starts with the current objects (as
// informers start theirs) gets them and the bookmark that ends them. The
// watch cache serves it only when etcd can be asked for watch progress.
func expectInitialEvents(ctx context.Context, t *testing.T, store storage.Interface, key, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	predicate := storage.Everything
	predicate.AllowWatchBookmarks = true
	sendInitialEvents := true
	w, err := store.Watch(ctx, key, storage.ListOptions{Predicate: predicate, Recursive: true, SendInitialEvents: &sendInitialEvents})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for {
		select {
		case event, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			if event.Type == watch.Error {
				t.Fatalf("watch error after %v: %v", got, event.Object)
			}
			object, err := meta.Accessor(event.Object)
			if err != nil {
				t.Fatalf("%s %T: %v", event.Type, event.Object, err)
			}
			got = append(got, string(event.Type)+" "+object.GetName())
			if event.Type == watch.Bookmark && object.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				if len(got) != 2 || got[0] != "ADDED "+name {
					t.Errorf("initial events %v, want ADDED %s and the bookmark", got, name)
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("no end of the initial events, got %v", got)
		}
	}
}
