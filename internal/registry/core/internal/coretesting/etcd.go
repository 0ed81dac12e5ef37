// Package coretesting runs the core-lite stores against a real embedded etcd
// in tests.
package coretesting

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

// StartEtcd starts an embedded etcd on unix sockets (never on 2379/2380)
// that stops when the test ends, and returns its client URL.
func StartEtcd(t testing.TB) string {
	t.Helper()
	return etcdtest.Start(t)
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
	switch resource.Group {
	case corescheme.CoordinationV1.Group:
		storageVersion = corescheme.CoordinationV1
	case corescheme.SchedulingV1.Group:
		// PriorityClasses are stored as v1, PodGroups as v1beta1.
		storageVersion = corescheme.SchedulingV1
		if resource.Resource == "podgroups" {
			storageVersion = corescheme.SchedulingV1beta1
		}
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
