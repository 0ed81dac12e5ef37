package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/draplane/draplane/controllermanager"
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

// config is what the controller manager runs the simulator with; nil when
// the simulator is off.
func (o *SimulatorOptions) config() *controllermanager.SimulatorConfig {
	if !o.enabled() {
		return nil
	}
	return &controllermanager.SimulatorConfig{
		Options: simulator.Options{
			Nodes:             o.Nodes,
			DevicesPerNode:    o.DevicesPerNode,
			Driver:            o.Driver,
			PodDuration:       o.PodDuration,
			HeartbeatInterval: o.HeartbeatInterval,
		},
		LeaseName: o.LeaseName,
	}
}
