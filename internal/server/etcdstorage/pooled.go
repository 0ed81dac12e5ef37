package etcdstorage

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/draplane/draplane/internal/server/gopool"
)

// pooledUpdates is a store whose updates run on the goroutines of
// updaters. An update runs the field manager's walks of both objects,
// deep, on the stack of the goroutine the handler started for the
// request; on a kept goroutine that stack is grown already (package
// gopool).
type pooledUpdates struct {
	storage.Interface
}

// updaters run the updates of every store.
var updaters = gopool.New(10 * time.Second)

func (s pooledUpdates) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	var err error
	updaters.Call(func() {
		err = s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
	})
	return err
}
