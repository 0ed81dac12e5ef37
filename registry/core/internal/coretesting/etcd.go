// Package coretesting runs the core-lite stores against a real embedded etcd
// in tests.
package coretesting

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/draplane/draplane/registry/core/internal/corescheme"
)

// StartEtcd starts an embedded etcd that listens only on unix sockets in a
// temporary directory (so never on 2379/2380) and stops when the test ends.
// It returns the client URL.
func StartEtcd(t testing.TB) string {
	t.Helper()
	// Socket paths must stay short (108 bytes), so not t.TempDir().
	dir, err := os.MkdirTemp("", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	cfg.UnsafeNoFsync = true
	clientURL := url.URL{Scheme: "unix", Path: filepath.Join(dir, "client.sock")}
	peerURL := url.URL{Scheme: "unix", Path: filepath.Join(dir, "peer.sock")}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(server.Close)
	select {
	case <-server.Server.ReadyNotify():
	case err := <-server.Err():
		t.Fatalf("etcd failed: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("etcd did not become ready within a minute")
	}
	return clientURL.String()
}

// NewRESTOptionsGetter starts an embedded etcd and returns options that
// store core-lite objects in it through the watch cache, as the server does.
func NewRESTOptionsGetter(t testing.TB) generic.RESTOptionsGetter {
	t.Helper()
	config := storagebackend.NewDefaultConfig("/registry-test", nil)
	config.Transport.ServerList = []string{StartEtcd(t)}
	return &optionsGetter{config: config, codecs: serializer.NewCodecFactory(corescheme.Scheme)}
}

type optionsGetter struct {
	config *storagebackend.Config
	codecs serializer.CodecFactory
}

func (g *optionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	storageVersion := corescheme.CoreV1
	if resource.Group == corescheme.CoordinationV1.Group {
		storageVersion = corescheme.CoordinationV1
	}
	config := *g.config
	config.Codec = g.codecs.LegacyCodec(storageVersion)
	config.EncodeVersioner = storageVersion
	return generic.RESTOptions{
		StorageConfig:           config.ForResource(resource),
		Decorator:               genericregistry.StorageWithCacher(),
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          resource.Group + "/" + resource.Resource,
	}, nil
}

// Ready waits until the store's watch cache is initialized (a watch on an
// initializing cache fails) and releases the cache and the etcd client when
// the test ends.
func Ready(t testing.TB, store *genericregistry.Store) {
	t.Helper()
	t.Cleanup(store.DestroyFunc)
	if store.ReadinessCheckFunc == nil {
		return
	}
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return store.ReadinessCheckFunc() == nil, nil
	})
	if err != nil {
		t.Fatalf("watch cache of %s not ready: %v", store.DefaultQualifiedResource, err)
	}
}

// Context is a request context for namespace ns (empty for cluster-scoped
// objects).
func Context(t testing.TB, ns string) context.Context {
	return genericapirequest.WithNamespace(t.Context(), ns)
}
