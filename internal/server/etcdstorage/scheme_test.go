package etcdstorage

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/draplane/draplane/internal/registry/core"
	"github.com/draplane/draplane/internal/testing/apitest"
)

// NewScheme stands in for server.NewScheme, which these tests cannot
// import (server imports this package): resource.draplane.dev and, with
// coreLite, core-lite's types (the tests store pods and slices).
func NewScheme(coreLite bool) (*runtime.Scheme, serializer.CodecFactory, error) {
	var add []func(*runtime.Scheme) error
	if coreLite {
		add = append(add, core.AddToScheme)
	}
	scheme := apitest.Scheme(add...)
	return scheme, serializer.NewCodecFactory(scheme), nil
}

// startTestEtcd starts an embedded etcd for one test, closed when the test
// ends, and returns it with the codecs of NewScheme(true).
func startTestEtcd(ctx context.Context, t *testing.T) (*EmbeddedEtcd, serializer.CodecFactory) {
	t.Helper()
	e, err := startEmbeddedEtcd(ctx, t.TempDir(), &EmbeddedEtcdConfig{QuotaBackendBytes: 1 << 28, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	_, codecs, err := NewScheme(true)
	if err != nil {
		t.Fatal(err)
	}
	return e, codecs
}
