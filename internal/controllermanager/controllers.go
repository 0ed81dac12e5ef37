package controllermanager

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// Controller describes one controller the manager runs: the name it logs
// under, its Run, its workers, and where it runs, which is the answer to
// "where does this controller start":
//
//   - leader-elected: behind the controllers' Lease, on one replica at a
//     time. These are built anew for each term of leadership
//     (newControllers), since a controller cannot be restarted;
//   - on every replica: from the moment the server serves, whether or not
//     this replica leads. These are core-lite's namespace and ClusterRole
//     aggregation controllers, whose writes the replicas may all make
//     (they are idempotent) and which keep core-lite working wherever it is
//     served. Core-lite builds them once on its own clients and informers
//     and adds them with AddEveryReplica; the server starts them.
type Controller struct {
	name string
	run  func(ctx context.Context, workers int)
	// workers, when not zero, replaces the Config's Workers.
	workers int
	// everyReplica: not leader-elected.
	everyReplica bool
}

// Name is the name the controller logs under.
func (c Controller) Name() string { return c.name }

// AddEveryReplica adds a controller that runs on every replica with
// workers workers, started by StartEveryReplica.
func (m *ControllerManager) AddEveryReplica(name string, workers int, run func(ctx context.Context, workers int)) {
	m.everyReplica = append(m.everyReplica, Controller{name: name, run: run, workers: workers, everyReplica: true})
}

// EveryReplica lists the controllers that run on every replica.
func (m *ControllerManager) EveryReplica() []Controller { return m.everyReplica }

// StartEveryReplica runs a controller of EveryReplica in the background
// until ctx ends, logging under its name.
func (m *ControllerManager) StartEveryReplica(ctx context.Context, c Controller) error {
	if !c.everyReplica {
		return fmt.Errorf("controller %s is leader-elected: StartControllers runs it", c.name)
	}
	ctx = klog.NewContext(ctx, klog.Background().WithName(c.name))
	go c.run(ctx, c.workers)
	return nil
}
