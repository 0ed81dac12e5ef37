// Package etcdtest runs an embedded etcd for storage tests and hands out
// REST options that store objects in it the way the server does.
package etcdtest

import (
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
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// Start runs a single-member etcd on unix sockets in a temporary directory
// (never on 2379/2380) until the test ends and returns its client URL.
func Start(t testing.TB) string {
	t.Helper()
	// Socket paths are limited to 108 bytes, so not t.TempDir().
	dir, err := os.MkdirTemp("", "etcdtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	// Test data is thrown away: no need to wait for the disk.
	cfg.UnsafeNoFsync = true
	client := url.URL{Scheme: "unix", Path: filepath.Join(dir, "client.sock")}
	peer := url.URL{Scheme: "unix", Path: filepath.Join(dir, "peer.sock")}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(etcd.Close)
	select {
	case <-etcd.Server.ReadyNotify():
	case err := <-etcd.Err():
		t.Fatalf("etcd failed: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("etcd not ready within two minutes")
	}
	return client.String()
}

// RESTOptionsGetter starts an etcd and returns options that store every
// resource encoded as storageVersion, straight in etcd (no watch cache, so
// a test never waits for one to initialise).
func RESTOptionsGetter(t testing.TB, scheme *runtime.Scheme, storageVersion schema.GroupVersion) generic.RESTOptionsGetter {
	t.Helper()
	config := storagebackend.NewDefaultConfig("/registry-test", serializer.NewCodecFactory(scheme).LegacyCodec(storageVersion))
	config.Transport.ServerList = []string{Start(t)}
	return optionsGetter{config}
}

type optionsGetter struct{ config *storagebackend.Config }

func (g optionsGetter) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig:           g.config.ForResource(resource),
		Decorator:               generic.UndecoratedStorage,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          resource.Group + "/" + resource.Resource,
	}, nil
}
