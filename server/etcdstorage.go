package server

import (
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
)

// inProcessEtcd is the API server's storage client of the embedded etcd:
// one etcd client that calls the etcd server's request handlers directly
// instead of speaking gRPC over a loopback connection. Requests and
// responses are passed as Go values: no protobuf encoding, no HTTP/2
// framing, no socket. The generic storage factory would open a gRPC
// connection per resource, and that plumbing cost about an eighth of the
// server's CPU per placed pod.
//
// The health and readiness checks of /healthz and /readyz still connect
// over the loopback listener, as they would to an external etcd.
type inProcessEtcd struct {
	etcd *EmbeddedEtcd

	once      sync.Once
	client    *kubernetes.Client
	compactor etcd3.Compactor
	// closed is set by close: storages created after it would use a
	// closed client.
	closed bool
	mutex  sync.Mutex
}

// InProcessRESTOptions wraps the REST options of the generic storage
// factory so that every resource is stored through the in-process client
// of the embedded etcd. watchCached says which resources get a watch
// cache (--watch-cache, --watch-cache-sizes), as the generic options
// decide it.
func (e *EmbeddedEtcd) InProcessRESTOptions(next generic.RESTOptionsGetter, watchCached func(schema.GroupResource) bool) generic.RESTOptionsGetter {
	e.inProcess = &inProcessEtcd{etcd: e}
	return inProcessRESTOptions{next: next, etcd: e.inProcess, watchCached: watchCached}
}

type inProcessRESTOptions struct {
	next        generic.RESTOptionsGetter
	etcd        *inProcessEtcd
	watchCached func(schema.GroupResource) bool
}

func (o inProcessRESTOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := o.next.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = o.etcd.decorator(o.watchCached(resource))
	return opts, nil
}

// start creates the client and the compactor on first use. Compaction
// runs on the interval of the first resource's config, which is the same
// for all (--etcd-compaction-interval).
func (e *inProcessEtcd) start(config *storagebackend.ConfigForResource) {
	e.once.Do(func() {
		client := &kubernetes.Client{Client: v3client.New(e.etcd.etcd.Server)}
		client.Kubernetes = client
		// As the generic factory does: the latency of each etcd call is
		// recorded for the request's latency breakdown.
		client.KV = etcd3.NewETCDLatencyTracker(client.KV)
		e.client = client
		// The storage asks etcd whether it can request watch progress
		// (the watch cache needs that for consistent reads and for
		// watches that start with a list) by calling each endpoint the
		// client knows. An in-process client knows none, so the
		// question is asked here, under the listener's address.
		etcdfeature.DefaultFeatureSupportChecker.CheckClient(client.Ctx(), inProcessEndpoint{client.Client, e.etcd.ClientURL}, storage.RequestWatchProgress)
		if config.CompactionInterval > 0 {
			e.compactor = etcd3.StartCompactorPerEndpoint(client.Client, config.CompactionInterval)
		}
	})
}

// decorator creates a resource's storage on the in-process client and,
// when cached, puts the watch cache in front of it exactly as
// k8s.io/apiserver's StorageWithCacher does.
func (e *inProcessEtcd) decorator(cached bool) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, triggers storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		raw, destroyRaw, err := e.rawStorage(config, newFunc, newListFunc, resourcePrefix)
		if err != nil || !cached {
			return raw, destroyRaw, err
		}
		cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             raw,
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
		delegator := cacherstorage.NewCacheDelegator(cacher, raw)
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

// rawStorage is the etcd3 store of k8s.io/apiserver on the in-process
// client, set up as its storage factory sets it up.
func (e *inProcessEtcd) rawStorage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	e.mutex.Lock()
	closed := e.closed
	e.mutex.Unlock()
	if closed {
		return nil, nil, fmt.Errorf("storage of %s: the embedded etcd is stopped", config.GroupResource)
	}
	e.start(config)

	transformer := config.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	decoder := etcd3.NewDefaultDecoder(config.Codec, versioner)
	unsafeDeletion := utilfeature.DefaultFeatureGate.Enabled(genericfeatures.AllowUnsafeMalformedObjectDeletion)
	if unsafeDeletion {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	store, err := etcd3.New(e.client, e.compactor, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix,
		config.GroupResource, transformer, config.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		return nil, nil, fmt.Errorf("storage of %s: %w", config.GroupResource, err)
	}
	var s storage.Interface = store
	if unsafeDeletion {
		s = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(s, config.GroupResource)
	}
	var once sync.Once
	return s, func() { once.Do(store.Close) }, nil
}

// inProcessEndpoint names the in-process client's one endpoint; its
// status calls reach the embedded etcd whatever endpoint they name.
type inProcessEndpoint struct {
	*clientv3.Client
	url string
}

func (e inProcessEndpoint) Endpoints() []string { return []string{e.url} }

// close stops the compactor and the client. The shared client outlives
// each resource's storage and ends with the embedded etcd.
func (e *inProcessEtcd) close() {
	e.mutex.Lock()
	defer e.mutex.Unlock()
	e.closed = true
	if e.compactor != nil {
		if c, ok := e.compactor.(interface{ Stop() }); ok {
			c.Stop()
		}
	}
	if e.client != nil {
		_ = e.client.Close()
	}
}
