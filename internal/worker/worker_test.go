package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
)

// TestRun: every key is handled once the informers synced, and Run returns
// only after the queue is shut down and the handler of the last key
// returned.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	var (
		mu      sync.Mutex
		handled = map[string]int{}
		synced  bool
	)
	allHandled := make(chan struct{})
	handle := func(ctx context.Context, key string) {
		mu.Lock()
		defer mu.Unlock()
		if !synced {
			t.Errorf("key %q handled before the informers synced", key)
		}
		handled[key]++
		queue.Forget(key)
		if len(handled) == 3 {
			close(allHandled)
		}
	}
	hasSynced := func() bool {
		mu.Lock()
		defer mu.Unlock()
		synced = true
		return true
	}
	for _, key := range []string{"a", "b", "c"} {
		queue.Add(key)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, queue, 2, handle, cache.InformerSynced(hasSynced))
	}()
	select {
	case <-allHandled:
	case <-time.After(time.Minute):
		t.Fatal("keys not handled")
	}
	cancel()
	<-done
	if !queue.ShuttingDown() {
		t.Error("queue not shut down after Run returned")
	}
	for key, n := range handled {
		if n != 1 {
			t.Errorf("key %q handled %d times, want once", key, n)
		}
	}
}

// TestRunNotSynced: when ctx ends before the informers sync, no key is
// handled and the queue is shut down.
func TestRunNotSynced(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	queue.Add("a")
	Run(ctx, queue, 1, func(context.Context, string) { t.Error("key handled without synced informers") }, func() bool { return false })
	if !queue.ShuttingDown() {
		t.Error("queue not shut down")
	}
}

// recordingQueue records what Requeue asked of it.
type recordingQueue struct{ calls []string }

func (q *recordingQueue) Forget(item string)         { q.calls = append(q.calls, "forget "+item) }
func (q *recordingQueue) AddRateLimited(item string) { q.calls = append(q.calls, "ratelimited "+item) }
func (q *recordingQueue) AddAfter(item string, d time.Duration) {
	q.calls = append(q.calls, "after "+d.String()+" "+item)
}

func TestRequeue(t *testing.T) {
	for _, tc := range []struct {
		name         string
		requeueAfter time.Duration
		err          error
		want         []string
		wantLogged   bool
	}{
		{name: "done", want: []string{"forget k"}},
		{name: "later", requeueAfter: 2 * time.Second, want: []string{"forget k", "after 2s k"}},
		{name: "error wins over later", requeueAfter: time.Second, err: errors.New("boom"), want: []string{"ratelimited k"}, wantLogged: true},
		{name: "conflict retried quietly", err: apierrors.NewConflict(schema.GroupResource{Resource: "clusterroles"}, "edit", errors.New("modified")), want: []string{"ratelimited k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged := false
			saved := utilruntime.ErrorHandlers
			utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(context.Context, error, string, ...any) { logged = true }}
			defer func() { utilruntime.ErrorHandlers = saved }()
			q := &recordingQueue{}
			Requeue(context.Background(), q, "k", tc.requeueAfter, tc.err, "Syncing failed", "key")
			if !slices.Equal(q.calls, tc.want) {
				t.Errorf("queue calls %v, want %v", q.calls, tc.want)
			}
			if logged != tc.wantLogged {
				t.Errorf("logged as an error: %v, want %v", logged, tc.wantLogged)
			}
		})
	}
}
