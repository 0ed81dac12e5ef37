// Package worker is the loop every controller (and the simulator) runs:
// wait for the informers, let workers take keys from the queue until the
// context ends, then shut the queue down once the workers are done with
// their current key. What becomes of a key after it was handled (forgotten,
// retried with backoff, looked at again later) is the controller's
// decision, made in its handler through the queue.
package worker

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Queue is the part of a workqueue the loop uses; a controller's handler
// uses the rest (Forget, AddRateLimited, AddAfter) of its own queue.
type Queue[T comparable] interface {
	Get() (item T, shutdown bool)
	Done(item T)
	ShutDown()
}

// Handler handles one key taken from the queue. It tells the queue what
// becomes of the key (Forget, AddRateLimited, AddAfter); Run marks the
// key done afterwards.
type Handler[T comparable] func(ctx context.Context, key T)

// Run waits until every informer in synced has synced, then runs workers
// that hand keys to handle until ctx ends. It blocks, and returns once the
// queue is shut down and every worker has finished its current key (or
// right away when ctx ends before the informers synced).
func Run[T comparable](ctx context.Context, queue Queue[T], workers int, handle Handler[T], synced ...cache.InformerSynced) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for ProcessNext(ctx, queue, handle) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	// Let the workers finish their current key before the queue goes.
	queue.ShutDown()
	wg.Wait()
}

// ProcessNext waits for the next key and handles it. It returns false once
// the queue is shut down.
func ProcessNext[T comparable](ctx context.Context, queue Queue[T], handle Handler[T]) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	handle(ctx, key)
	return true
}

// RetryQueue is the part of a rate-limited workqueue that Requeue uses.
type RetryQueue[T comparable] interface {
	Forget(item T)
	AddRateLimited(item T)
	AddAfter(item T, duration time.Duration)
}

// Requeue settles a key after a sync that returned err and requeueAfter:
// after an error it is logged (failed is the message, object names the
// key in the log line) and retried with backoff; otherwise its backoff is
// forgotten and, with requeueAfter > 0, it is looked at again then.
//
// A conflict is retried with backoff too, but logged only at V(2): it means
// the controller wrote from a cache that an informer had not yet caught up
// with, which is normal (at start above all) and heals on the next sync.
func Requeue[T comparable](ctx context.Context, queue RetryQueue[T], key T, requeueAfter time.Duration, err error, failed, object string) {
	switch {
	case apierrors.IsConflict(err):
		klog.FromContext(ctx).V(2).Info(failed+", retrying after a conflict", object, key, "err", err)
		queue.AddRateLimited(key)
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, failed, object, key)
		queue.AddRateLimited(key)
	case requeueAfter > 0:
		queue.Forget(key)
		queue.AddAfter(key, requeueAfter)
	default:
		queue.Forget(key)
	}
}
