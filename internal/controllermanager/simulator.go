package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/internal/inprocess"
	"github.com/draplane/draplane/internal/simulator"
)

// SimulatorConfig says what the simulator simulates.
//
// The simulator is leader-elected on a Lease of its own, with the
// controllers' timings and switch: one replica writes the simulated nodes,
// slices and pod statuses, and the simulator does not depend on the
// controllers running (simulated nodes without controllers is a valid setup
// for driving allocation by hand).
type SimulatorConfig struct {
	// Options of the simulator; OnSeeded is set by the controller manager.
	Options simulator.Options
	// LeaseName is the simulator's Lease.
	LeaseName string
}

// simulatorState is what /readyz needs to know about the simulator.
type simulatorState struct {
	// seeded: this replica registered every simulated node and slice.
	seeded atomic.Bool
	// otherLeader: another replica runs the simulator.
	otherLeader atomic.Bool
}

// SimulatorReadyzCheck keeps /readyz failing until the simulated nodes
// exist, so that what `make run` prints is usable at once: `kubectl get
// nodes` right after the server is ready lists every node Ready. A replica
// that does not lead the simulator is ready as soon as it knows who does.
func (m *ControllerManager) SimulatorReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("simulator", func(*http.Request) error {
		if m.simulator.seeded.Load() || m.simulator.otherLeader.Load() {
			return nil
		}
		return errors.New("simulated nodes not registered yet")
	})
}

// StartSimulator starts the simulator in the background, behind its own
// Lease when leader election is on, until ctx ends or the leases are
// released. It works on the API server's own nodes and pods (core-lite).
func (m *ControllerManager) StartSimulator(ctx context.Context, loopback *rest.Config) error {
	if m.config.Simulator == nil {
		return errors.New("simulator: not configured")
	}
	qps, burst := m.simulatorClientBudget()
	kubeClient, resourceClient, err := m.clients(loopback, false, qps, burst)
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	shared, err := m.sharedInformers(loopback)
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	ctx = klog.NewContext(ctx, klog.Background().WithName("simulator"))
	stop := ctx.Done()
	nodeClients := inprocess.NewNodeClients(loopback, m.config.Simulator.Options.Driver)
	run := func(ctx context.Context) {
		m.runSimulator(ctx, kubeClient, resourceClient, nodeClients.Get, shared, stop)
	}
	if !m.config.LeaderElection.Enabled {
		go run(ctx)
		return nil
	}
	m.leases.goRun(ctx, func(ctx context.Context) {
		runLeaderElected(ctx, kubeClient, m.config.LeaderElection, campaign{
			leaseName:          m.config.Simulator.LeaseName,
			lead:               run,
			observe:            m.simulator.otherLeader.Store,
			noLockMessage:      "Cannot run the simulator: no leader election lock",
			startedMessage:     "Became leader, starting the simulator",
			stoppedMessage:     "Stopped leading the simulator",
			otherLeaderMessage: "Another replica runs the simulator",
		})
	})
	return nil
}

// simulatorClientBudget is the rate limit of the simulator's clients. It
// plays kubelet and driver for every simulated node, so it gets the budget
// of that many kubelets, and at least the controllers': with the
// controllers' alone, registering thousands of nodes and their slices
// waited on the client-side rate limiter.
func (m *ControllerManager) simulatorClientBudget() (float32, int) {
	nodes := m.config.Simulator.Options.Nodes
	return max(m.config.ClientQPS, inprocess.KubeletQPS*float32(nodes)), max(m.config.ClientBurst, inprocess.KubeletBurst*nodes)
}

// runSimulator runs the simulator for one term (inprocess.RunSimulator)
// and marks this replica's simulated nodes registered once it has seeded
// them.
func (m *ControllerManager) runSimulator(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	nodeClients func(string) (kubernetes.Interface, versioned.Interface), shared *inprocess.Informers, stop <-chan struct{}) {
	opts := m.config.Simulator.Options
	opts.OnSeeded = func() { m.simulator.seeded.Store(true) }
	opts.NodeClients = nodeClients
	inprocess.RunSimulator(ctx, kubeClient, resourceClient, opts, m.config.Workers, shared, stop)
}
