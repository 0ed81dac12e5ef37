package etcdstorage

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
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// inProcessEtcd makes the API server's storage of the embedded etcd on
// etcd clients that call the etcd server's request handlers directly
// instead of speaking gRPC over a loopback connection. Requests and
// responses are passed as Go values: no protobuf encoding, no HTTP/2
// framing, no socket. That plumbing was a visible share of the server's
// CPU per placed pod.
//
// Each resource's storage gets a client of its own, as the generic
// storage factory gives it a connection of its own: a client shares one
// watch stream among its watches, and etcd answers a watch progress
// request (which a watch cache makes) on the whole stream, which a
// resource's uncached watches would pass on to their clients as bookmarks
// they did not ask for.
//
// The health and readiness checks of /healthz and /readyz still connect
// over the loopback listener, as they would to an external etcd.
type inProcessEtcd struct {
	etcd *EmbeddedEtcd

	once sync.Once
	// admin runs the compactor and answered the feature check.
	admin     *clientv3.Client
	compactor etcd3.Compactor

	mutex sync.Mutex
	// clients are the storages' clients, closed at the latest with etcd.
	clients []*clientv3.Client
	// closed is set by close: storages created after it would use a
	// stopped etcd.
	closed bool
}

// InProcessRESTOptions wraps the REST options of the generic storage
// factory so that every resource is stored through the in-process client
// of the embedded etcd. watchCached says which resources get a watch
// cache (--watch-cache, --watch-cache-sizes), as the generic options
// decide it; the stores of the others take guesses from guesses.
func (e *EmbeddedEtcd) InProcessRESTOptions(next generic.RESTOptionsGetter, watchCached func(schema.GroupResource) bool, guesses *Guesses) generic.RESTOptionsGetter {
	e.inProcess = &inProcessEtcd{etcd: e}
	return inProcessRESTOptions{next: next, etcd: e.inProcess, watchCached: watchCached, guesses: guesses}
}

type inProcessRESTOptions struct {
	next        generic.RESTOptionsGetter
	etcd        *inProcessEtcd
	watchCached func(schema.GroupResource) bool
	guesses     *Guesses
}

func (o inProcessRESTOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := o.next.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = cachingDecorator(o.etcd.rawStorage, o.watchCached(resource), o.guesses)
	return opts, nil
}

// start creates the compactor and checks the server's features on first
// use, under the mutex that close takes. Compaction runs on the interval of the first resource's config,
// which is the same for all (--etcd-compaction-interval).
func (e *inProcessEtcd) start(config *storagebackend.ConfigForResource) {
	e.once.Do(func() {
		e.mutex.Lock()
		defer e.mutex.Unlock()
		e.admin = v3client.New(e.etcd.etcd.Server)
		// The storage asks etcd whether it can request watch progress
		// (the watch cache needs that for consistent reads and for
		// watches that start with a list) by calling each endpoint its
		// client knows. An in-process client knows none, so the
		// question is asked here, under the listener's address.
		etcdfeature.DefaultFeatureSupportChecker.CheckClient(e.admin.Ctx(), inProcessEndpoint{e.admin, e.etcd.ClientURL}, storage.RequestWatchProgress)
		if config.CompactionInterval > 0 {
			e.compactor = etcd3.StartCompactorPerEndpoint(e.admin, config.CompactionInterval)
		}
	})
}

// newClient is a storage's client.
func (e *inProcessEtcd) newClient() (*kubernetes.Client, error) {
	e.mutex.Lock()
	defer e.mutex.Unlock()
	if e.closed {
		return nil, fmt.Errorf("the embedded etcd is stopped")
	}
	client := &kubernetes.Client{Client: v3client.New(e.etcd.etcd.Server)}
	client.Kubernetes = client
	// As the generic factory does: the latency of each etcd call is
	// recorded for the request's latency breakdown.
	client.KV = etcd3.NewETCDLatencyTracker(client.KV)
	e.clients = append(e.clients, client.Client)
	return client, nil
}

// rawStorage is the etcd3 store of k8s.io/apiserver on the in-process
// client, set up as its storage factory sets it up.
func (e *inProcessEtcd) rawStorage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	e.start(config)
	client, err := e.newClient()
	if err != nil {
		return nil, nil, fmt.Errorf("storage of %s: %w", config.GroupResource, err)
	}

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
	store, err := etcd3.New(client, e.compactor, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix,
		config.GroupResource, transformer, config.LeaseManagerConfig, decoder, versioner)
	if err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("storage of %s: %w", config.GroupResource, err)
	}
	var s storage.Interface = store
	if unsafeDeletion {
		s = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(s, config.GroupResource)
	}
	var once sync.Once
	return s, func() {
		once.Do(func() {
			store.Close()
			_ = client.Close()
		})
	}, nil
}

// inProcessEndpoint names the in-process client's one endpoint; its
// status calls reach the embedded etcd whatever endpoint they name.
type inProcessEndpoint struct {
	*clientv3.Client
	url string
}

func (e inProcessEndpoint) Endpoints() []string { return []string{e.url} }

// close stops the compactor and every client. The storages' destroy
// functions close theirs first when the API server shuts down properly;
// closing a client again does nothing.
func (e *inProcessEtcd) close() {
	e.mutex.Lock()
	defer e.mutex.Unlock()
	e.closed = true
	if e.compactor != nil {
		if c, ok := e.compactor.(interface{ Stop() }); ok {
			c.Stop()
		}
	}
	if e.admin != nil {
		_ = e.admin.Close()
	}
	for _, c := range e.clients {
		_ = c.Close()
	}
}
