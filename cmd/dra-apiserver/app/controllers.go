package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/draplane/draplane/allocator"
	"github.com/draplane/draplane/internal/controllermanager"
	"github.com/draplane/draplane/internal/controllers/allocation"
	"github.com/draplane/draplane/internal/controllers/devicetainteviction"
)

// ControllerOptions say whether and how the in-process controllers run.
type ControllerOptions struct {
	// Run turns the controllers on.
	Run bool
	// LeaderElect makes replicas on one etcd share the work: only the
	// holder of the lease runs controllers.
	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// LeaseNamespace and LeaseName name the coordination.k8s.io Lease.
	LeaseNamespace string
	LeaseName      string
	// Workers per controller.
	Workers int
	// EvictionsPerSecond bounds device taint evictions over the whole
	// control plane.
	EvictionsPerSecond float64
	// BindingTimeout is how long a pod waits for the binding conditions
	// of its devices before their claims are deallocated.
	BindingTimeout time.Duration
	// ClientQPS and ClientBurst bound each of the controllers' clients
	// (per API group); 0 until complete picks the mode's default.
	ClientQPS   float32
	ClientBurst int
	// GangBudget bounds the allocator searches of one gang placement;
	// GangGreedy switches the backtracking off.
	GangBudget int
	GangGreedy bool
}

// The controllers' client budget. All controllers share one client per
// API group, and placing a pod takes three requests of the core one
// (the pod's claim statuses, the binding, the Scheduled event): a budget of
// 500 requests per second held placement at a third of that in pods per
// second, whatever the server could do. Standalone, the clients call this
// server in the process, and the budget is above what it serves on a few
// cores: it bounds a controller gone wrong without pacing normal work.
// Aggregated, pods, nodes and events are a host cluster's, shared with
// everything else that runs there, and the budget stays what it was.
const (
	DefaultControllerClientQPS   = 3000
	DefaultControllerClientBurst = 6000

	DefaultAggregatedControllerClientQPS   = 500
	DefaultAggregatedControllerClientBurst = 1000
)

// NewControllerOptions returns the defaults: controllers on, behind leader
// election with the timings of kube-controller-manager.
func NewControllerOptions() *ControllerOptions {
	return &ControllerOptions{
		Run:                true,
		LeaderElect:        true,
		LeaseDuration:      15 * time.Second,
		RenewDeadline:      10 * time.Second,
		RetryPeriod:        2 * time.Second,
		LeaseNamespace:     "kube-system",
		LeaseName:          "draplane-controllers",
		Workers:            4,
		EvictionsPerSecond: devicetainteviction.DefaultEvictionsPerSecond,
		BindingTimeout:     allocation.DefaultBindingTimeout,
		GangBudget:         allocator.DefaultGangBudget,
	}
}

// AddFlags adds the controller flags.
func (o *ControllerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Run, "controllers", o.Run, "Run the in-process controllers (claims from templates, allocation and placement, device taint eviction).")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run the controllers only while holding the leader lease, so several replicas can share one etcd.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a non-leader waits after the last renewal before taking over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps trying to renew before it gives up leading.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often candidates try to acquire or renew the lease.")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace, "Namespace of the leader election Lease.")
	fs.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName, "Name of the leader election Lease.")
	fs.IntVar(&o.Workers, "controller-workers", o.Workers, "Workers per controller.")
	fs.Float32Var(&o.ClientQPS, "controller-client-qps", o.ClientQPS, fmt.Sprintf("Requests per second the in-process controllers may send, each API group's client (the core one carries three requests per placed pod). 0: %d standalone, %d aggregated (where the core client is the host cluster's).", DefaultControllerClientQPS, DefaultAggregatedControllerClientQPS))
	fs.IntVar(&o.ClientBurst, "controller-client-burst", o.ClientBurst, fmt.Sprintf("Requests the in-process controllers may send in a burst above --controller-client-qps, each API group's client. 0: %d standalone, %d aggregated.", DefaultControllerClientBurst, DefaultAggregatedControllerClientBurst))
	fs.Float64Var(&o.EvictionsPerSecond, "device-taint-evictions-per-second", o.EvictionsPerSecond, "Upper bound on pods evicted per second because of device taints.")
	fs.DurationVar(&o.BindingTimeout, "device-binding-timeout", o.BindingTimeout,
		"How long after the allocation a pod waits for the binding conditions of its devices (KEP-5007) before the claim is deallocated and the pod placed again; upstream's scheduler default.")
	fs.IntVar(&o.GangBudget, "gang-placement-budget", o.GangBudget, "Allocator searches one gang placement may take (GenericWorkload); a gang not placed within them counts as not fitting until the cluster changes.")
	fs.BoolVar(&o.GangGreedy, "gang-placement-greedy", o.GangGreedy, "Place the pods of a gang one after the other without revisiting earlier pods' nodes and devices, as a pod-at-a-time scheduler does (still all or nothing). For comparisons.")
	_ = fs.MarkHidden("gang-placement-greedy")
}

// complete fills in the client budget the mode calls for where none was
// given.
func (o *ControllerOptions) complete(aggregated bool) {
	qps, burst := float32(DefaultControllerClientQPS), DefaultControllerClientBurst
	if aggregated {
		qps, burst = DefaultAggregatedControllerClientQPS, DefaultAggregatedControllerClientBurst
	}
	if o.ClientQPS == 0 {
		o.ClientQPS = qps
	}
	if o.ClientBurst == 0 {
		o.ClientBurst = burst
	}
}

// Validate checks the controller options.
func (o *ControllerOptions) Validate() []error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--controller-workers must be at least 1, got %d", o.Workers))
	}
	if o.LeaderElect && !(o.RetryPeriod > 0 && o.RetryPeriod < o.RenewDeadline && o.RenewDeadline < o.LeaseDuration) {
		errs = append(errs, errors.New("leader election needs 0 < --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration"))
	}
	if o.ClientQPS <= 0 || o.ClientBurst < 1 {
		errs = append(errs, fmt.Errorf("--controller-client-qps must be positive and --controller-client-burst at least 1, got %v and %d", o.ClientQPS, o.ClientBurst))
	}
	if o.BindingTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--device-binding-timeout must be positive, got %v", o.BindingTimeout))
	}
	if o.GangBudget < 1 {
		errs = append(errs, fmt.Errorf("--gang-placement-budget must be at least 1, got %d", o.GangBudget))
	}
	if o.EvictionsPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("--device-taint-evictions-per-second must be positive, got %v", o.EvictionsPerSecond))
	}
	return errs
}

// ApplyTo fills in what the controller manager takes from these options.
func (o *ControllerOptions) ApplyTo(c *controllermanager.Config) {
	c.Controllers = o.Run
	c.Workers = o.Workers
	c.EvictionsPerSecond = o.EvictionsPerSecond
	c.BindingTimeout = o.BindingTimeout
	c.GangBudget, c.GangGreedy = o.GangBudget, o.GangGreedy
	c.ClientQPS, c.ClientBurst = o.ClientQPS, o.ClientBurst
	c.LeaderElection = controllermanager.LeaderElectionConfig{
		Enabled:        o.LeaderElect,
		LeaseDuration:  o.LeaseDuration,
		RenewDeadline:  o.RenewDeadline,
		RetryPeriod:    o.RetryPeriod,
		LeaseNamespace: o.LeaseNamespace,
	}
	c.LeaseName = o.LeaseName
}
