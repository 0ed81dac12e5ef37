package etcdstorage

import (
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
