package controllermanager

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// leaseHolders tracks the work that runs under leader election so that a
// stopping server hands its leases back while it still serves. Without
// that, the lease release (made through the loopback connection) races the
// listener closing, and a restarted or other replica waits a whole lease
// duration before the controllers run again.
type leaseHolders struct {
	mu      sync.Mutex
	cancels []context.CancelFunc
	running sync.WaitGroup
}

// goRun runs f in a goroutine with a context that ends with parent or when
// the leases are released.
func (l *leaseHolders) goRun(parent context.Context, f func(ctx context.Context)) {
	if l == nil {
		go f(parent)
		return
	}
	ctx, cancel := context.WithCancel(parent)
	l.mu.Lock()
	l.cancels = append(l.cancels, cancel)
	l.mu.Unlock()
	l.running.Add(1)
	go func() {
		defer l.running.Done()
		defer cancel()
		f(ctx)
	}()
}

// release stops the work and waits, at most timeout, until every
// leader-election loop has returned (and with it released its lease).
func (l *leaseHolders) release(timeout time.Duration) {
	l.mu.Lock()
	for _, cancel := range l.cancels {
		cancel()
	}
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.running.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		klog.Background().Info("Leader-elected work did not stop in time; its leases expire on their own", "timeout", timeout)
	}
}
