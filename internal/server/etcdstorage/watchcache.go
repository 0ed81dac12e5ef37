package etcdstorage

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/sharedmaps"
)

// rawStorageFunc creates a resource's etcd3 store: generic.NewRawStorage,
// or inProcessEtcd.rawStorage for the embedded etcd.
type rawStorageFunc func(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error)

// CachingRESTOptions wraps the REST options of the generic storage factory
// of an external etcd so that watch caches are made by cachingDecorator,
// as they are for the embedded etcd (InProcessRESTOptions). watchCached
// says which resources get one, as the generic options decide it.
// The stores of the others take guesses from guesses (see Guesses).
func CachingRESTOptions(next generic.RESTOptionsGetter, watchCached func(schema.GroupResource) bool, guesses *Guesses) generic.RESTOptionsGetter {
	return cachingRESTOptions{next: next, watchCached: watchCached, guesses: guesses}
}

type cachingRESTOptions struct {
	next        generic.RESTOptionsGetter
	watchCached func(schema.GroupResource) bool
	guesses     *Guesses
}

func (o cachingRESTOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := o.next.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = cachingDecorator(generic.NewRawStorage, o.watchCached(resource), o.guesses)
	return opts, nil
}

// cachingDecorator creates a resource's store with raw and, when cached,
// puts the watch cache in front of it exactly as k8s.io/apiserver's
// StorageWithCacher does, except that what the cache keeps of a resource
// with a cacheCompactor passes through it first. Without a cache, the
// store's updates and deletes take guesses from guesses. Every store's
// updates run on kept goroutines (pooledUpdates).
func cachingDecorator(raw rawStorageFunc, cached bool, guesses *Guesses) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, triggers storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		store, destroyRaw, err := raw(config, newFunc, newListFunc, resourcePrefix)
		if err != nil {
			return store, destroyRaw, err
		}
		store = pooledUpdates{Interface: store}
		if !cached {
			return newGuessingStorage(store, guesses, config.GroupResource, resourcePrefix, newFunc), destroyRaw, nil
		}
		// The cache fills itself with lists and watches of source;
		// reads it cannot serve and writes go to store itself.
		source := store
		if compact := cacheCompactor(config.GroupResource); compact != nil {
			source = compactingStorage{Interface: store, compact: compact}
		}
		cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             source,
			Versioner:           storage.APIObjectVersioner{},
			GroupResource:       config.GroupResource,
			EventsHistoryWindow: config.EventsHistoryWindow,
			ResourcePrefix:      resourcePrefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        getAttrs,
			IndexerFuncs:        triggers,
			Indexers:            indexers,
			Codec:               config.Codec,
		})
		if err != nil {
			destroyRaw()
			return nil, func() {}, err
		}
		delegator := cacherstorage.NewCacheDelegator(cacher, store)
		var once sync.Once
		return delegator, func() {
			once.Do(func() {
				delegator.Stop()
				cacher.Stop()
				destroyRaw()
			})
		}, nil
	}
}

// cacheCompactor is what the watch cache of a resource passes each object
// through before keeping it, nil for most. A ResourceSlice's devices share
// the maps they have in common with other slices' (devicemaps): at 5,000
// nodes of 8 identical GPUs that is about half of what the cache holds of
// slices. (Equal managedFields field sets are shared by the fieldsv1string
// build tag of k8s.io/apimachinery, in every copy; see the Makefile.)
func cacheCompactor(resource schema.GroupResource) func(runtime.Object) {
	if resource == (schema.GroupResource{Group: resourceapi.GroupName, Resource: "resourceslices"}) {
		return sharedmaps.Share
	}
	return nil
}

// compactingStorage is the store as its watch cache sees it: the objects
// its lists and watches decoded, which only the cache holds, pass through
// compact. The cache hands out deep copies of them to updates and deletes,
// so nothing writes to what compact made shared.
type compactingStorage struct {
	storage.Interface
	compact func(runtime.Object)
}

func (s compactingStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	return meta.EachListItem(listObj, func(obj runtime.Object) error {
		s.compact(obj)
		return nil
	})
}

func (s compactingStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(event watch.Event) (watch.Event, bool) {
		if event.Type == watch.Error || event.Type == watch.Bookmark || event.Object == nil {
			return event, true
		}
		obj := event.Object
		// The cache's own watch wraps objects with their decode time.
		if timed, ok := obj.(storage.WatchEventWithRecordTime); ok {
			obj = timed.Unwrap()
		}
		s.compact(obj)
		return event, true
	}), nil
}
