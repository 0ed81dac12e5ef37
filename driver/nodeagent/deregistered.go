package nodeagent

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// DefaultDeregistrationGracePeriod is how long a driver's plugin may be
// gone before its slices are removed: the kubelet's (defaultWipingDelay
// in pkg/kubelet/cm/dra), long enough for a plugin's container to restart
// and short enough that pods are not placed for long on devices nobody
// prepares.
const DefaultDeregistrationGracePeriod = 30 * time.Second

// SliceRemover removes a node's slices of a driver whose plugins all
// deregistered and did not come back within a grace period, as the
// kubelet does. A plugin that comes back in time keeps its slices as
// they are. Call Gone when the last plugin of a driver deregistered and
// Back when one registered.
type SliceRemover struct {
	client versioned.Interface
	node   string
	grace  time.Duration
	clock  clock.WithDelayedExecution

	mu sync.Mutex
	// pending are the drivers whose removal is scheduled or running,
	// with the function that calls it off.
	pending map[string]context.CancelFunc
	wg      sync.WaitGroup
}

// NewSliceRemover returns a remover for the node's slices that waits
// grace (DefaultDeregistrationGracePeriod if 0) after a driver is gone.
// clk nil means the real clock.
func NewSliceRemover(client versioned.Interface, nodeName string, grace time.Duration, clk clock.WithDelayedExecution) *SliceRemover {
	if grace == 0 {
		grace = DefaultDeregistrationGracePeriod
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &SliceRemover{client: client, node: nodeName, grace: max(grace, 0), clock: clk, pending: map[string]context.CancelFunc{}}
}

// Gone schedules the removal of the driver's slices after the grace
// period. A removal scheduled already keeps its time: the period counts
// from when the driver went. ctx bounds the removal.
func (r *SliceRemover) Gone(ctx context.Context, driverName string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pending[driverName]; ok {
		return
	}
	logger := klog.FromContext(ctx).WithValues("driver", driverName, "node", r.node)
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	r.pending[driverName] = cancel
	logger.Info("Driver has no plugin; its slices go unless it registers again in time", "gracePeriod", r.grace)
	r.wg.Add(1)
	timer := r.clock.AfterFunc(r.grace, func() {
		defer r.wg.Done()
		r.remove(ctx, driverName)
	})
	context.AfterFunc(ctx, func() {
		if timer.Stop() {
			r.wg.Done()
		}
	})
}

// Back calls off the removal of the driver's slices, if it has not
// happened yet: a plugin of the driver registered.
func (r *SliceRemover) Back(driverName string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancel, ok := r.pending[driverName]; ok {
		cancel()
		delete(r.pending, driverName)
	}
}

// Wait waits for the removals that started to end (after their context
// ended, or Back).
func (r *SliceRemover) Wait() { r.wg.Wait() }

// remove deletes the driver's slices of the node, retrying with backoff
// until it succeeds or is called off.
func (r *SliceRemover) remove(ctx context.Context, driverName string) {
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Minute, Steps: 1 << 30}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		removed, err := driver.RemoveDriverSlices(ctx, r.client, r.node, driverName)
		if err != nil {
			logger.Error(err, "Removing the slices of a driver without a plugin failed, retrying")
			return false, nil
		}
		logger.Info("Removed the slices of a driver whose plugin did not come back", "slices", removed, "gracePeriod", r.grace)
		return true, nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() == nil {
		// Done: a later Gone schedules anew. (Called off: Back removed
		// the entry already, or the agent is stopping.)
		if cancel, ok := r.pending[driverName]; ok {
			cancel()
			delete(r.pending, driverName)
		}
	}
}
