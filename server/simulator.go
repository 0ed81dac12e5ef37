package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/simulator"
)

// SimulatorOptions say whether and what the simulator simulates.
//
// The simulator is leader-elected on a Lease of its own
// (kube-system/draplane-simulator), with the controllers' timings and
// --leader-elect switch: one replica writes the simulated nodes, slices
// and pod statuses, and the simulator does not depend on the controllers
// running (--controllers=false with simulated nodes is a valid setup for
// driving allocation by hand).
type SimulatorOptions struct {
	Nodes             int
	DevicesPerNode    int
	Driver            string
	PodDuration       time.Duration
	HeartbeatInterval time.Duration
	LeaseName         string
}

// NewSimulatorOptions returns the defaults: simulator off.
func NewSimulatorOptions() *SimulatorOptions {
	return &SimulatorOptions{
		DevicesPerNode:    simulator.DefaultDevicesPerNode,
		Driver:            simulator.DefaultDriver,
		HeartbeatInterval: simulator.DefaultHeartbeatInterval,
		LeaseName:         "draplane-simulator",
	}
}

// AddFlags adds the simulator flags.
func (o *SimulatorOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Nodes, "simulate-nodes", o.Nodes,
		"Simulate this many Ready nodes (sim-node-0, sim-node-1, ...), each with one ResourceSlice of the fake driver, and mark pods bound to them Running. 0 turns the simulator off.")
	fs.IntVar(&o.DevicesPerNode, "simulate-devices-per-node", o.DevicesPerNode,
		"GPUs per simulated node (attributes model, index, pcieRoot, driverVersion; capacity memory).")
	fs.StringVar(&o.Driver, "simulate-driver", o.Driver,
		"Name of the simulated DRA driver; its slices and nodes of an earlier run are replaced at start.")
	fs.DurationVar(&o.PodDuration, "simulate-pod-duration", o.PodDuration,
		"When positive, pods on simulated nodes with restartPolicy Never or OnFailure Succeed this long after they started (their claims are then released). 0 keeps pods Running.")
	fs.DurationVar(&o.HeartbeatInterval, "simulate-heartbeat-interval", o.HeartbeatInterval,
		"How often the simulated nodes renew their Ready condition.")
}

// Validate checks the simulator options.
func (o *SimulatorOptions) Validate() []error {
	var errs []error
	if o.Nodes < 0 || o.Nodes > 100000 {
		errs = append(errs, fmt.Errorf("--simulate-nodes must be between 0 and 100000, got %d", o.Nodes))
	}
	if o.DevicesPerNode < 1 || o.DevicesPerNode > 128 {
		// A slice holds at most 128 devices.
		errs = append(errs, fmt.Errorf("--simulate-devices-per-node must be between 1 and 128, got %d", o.DevicesPerNode))
	}
	if msgs := validation.IsDNS1123Subdomain(o.Driver); len(msgs) > 0 || len(o.Driver) > 63 {
		errs = append(errs, fmt.Errorf("--simulate-driver %q must be a DNS subdomain of at most 63 characters", o.Driver))
	}
	if o.PodDuration < 0 {
		errs = append(errs, fmt.Errorf("--simulate-pod-duration must not be negative, got %v", o.PodDuration))
	}
	if o.HeartbeatInterval <= 0 {
		errs = append(errs, errors.New("--simulate-heartbeat-interval must be positive"))
	}
	return errs
}

func (o *SimulatorOptions) enabled() bool { return o != nil && o.Nodes > 0 }

// simulatorRunner runs the simulator and tells /readyz about it.
type simulatorRunner struct {
	opts        *SimulatorOptions
	controllers *ControllerOptions
	// seeded: this replica registered every simulated node and slice.
	seeded atomic.Bool
	// otherLeader: another replica runs the simulator.
	otherLeader atomic.Bool
}

func newSimulatorRunner(opts *SimulatorOptions, controllers *ControllerOptions) *simulatorRunner {
	return &simulatorRunner{opts: opts, controllers: controllers}
}

// readyzCheck keeps /readyz failing until the simulated nodes exist, so
// that what `make run` prints is usable at once: `kubectl get nodes` right
// after the server is ready lists every node Ready. A replica that does
// not lead the simulator is ready as soon as it knows who does.
func (r *simulatorRunner) readyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("simulator", func(*http.Request) error {
		if r.seeded.Load() || r.otherLeader.Load() {
			return nil
		}
		return errors.New("simulated nodes not registered yet")
	})
}

// start is the post-start hook that runs the simulator against this
// server through the loopback connection, behind its own lease.
func (r *simulatorRunner) start(hook genericapiserver.PostStartHookContext) error {
	o, controllers := r.opts, r.controllers
	config := rest.CopyConfig(hook.LoopbackClientConfig)
	config.QPS, config.Burst = controllers.ClientQPS, controllers.ClientBurst
	kubeClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("simulator: kube client: %w", err)
	}
	resourceClient, err := versioned.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("simulator: resource client: %w", err)
	}
	ctx := klog.NewContext(hook, klog.Background().WithName("simulator"))
	run := func(ctx context.Context) {
		o.run(ctx, kubeClient, resourceClient, controllers.Workers, func() { r.seeded.Store(true) })
	}
	if !controllers.LeaderElect {
		go run(ctx)
		return nil
	}
	controllers.leases.goRun(ctx, func(ctx context.Context) { r.leadAndRun(ctx, kubeClient, run) })
	return nil
}

// leadAndRun campaigns for the simulator's lease until the server stops;
// each term of leadership gets a fresh simulator.
func (r *simulatorRunner) leadAndRun(ctx context.Context, kubeClient kubernetes.Interface, run func(context.Context)) {
	o, controllers := r.opts, r.controllers
	logger := klog.FromContext(ctx)
	hostname, _ := os.Hostname()
	identity := hostname + "_" + uuid.NewString()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, controllers.LeaseNamespace, o.LeaseName,
		nil, kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		logger.Error(err, "Cannot run the simulator: no leader election lock")
		return
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   controllers.LeaseDuration,
			RenewDeadline:   controllers.RenewDeadline,
			RetryPeriod:     controllers.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            o.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leaderCtx context.Context) {
					logger.Info("Became leader, starting the simulator", "identity", identity)
					run(leaderCtx)
				},
				OnStoppedLeading: func() {
					logger.Info("Stopped leading the simulator", "identity", identity)
				},
				OnNewLeader: func(current string) {
					r.otherLeader.Store(current != "" && current != identity)
					if current != identity {
						logger.Info("Another replica runs the simulator", "leader", current)
					}
				},
			},
		})
	}
}

// run builds the simulator with its own pod informer and runs it until
// ctx ends.
func (o *SimulatorOptions) run(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface, workers int, onSeeded func()) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	factory := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceFactory := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	sim, err := simulator.New(logger, kubeClient, resourceClient, factory.Core().V1().Pods(), resourceFactory.Resource().V1().ResourceClaims(), simulator.Options{
		Nodes:             o.Nodes,
		DevicesPerNode:    o.DevicesPerNode,
		Driver:            o.Driver,
		PodDuration:       o.PodDuration,
		HeartbeatInterval: o.HeartbeatInterval,
		OnSeeded:          onSeeded,
	})
	if err != nil {
		logger.Error(err, "Cannot run the simulator")
		return
	}
	factory.Start(ctx.Done())
	resourceFactory.Start(ctx.Done())
	sim.Run(ctx, workers)
	factory.Shutdown()
	resourceFactory.Shutdown()
}
