package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/controllermanager"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/simulator"
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
	// Pods: the simulated nodes play kubelet for the pods bound to them
	// (simulator.Options.NoPods when false).
	Pods bool
	// Binding conditions of the simulated devices (KEP-5007).
	BindingCondition        string
	BindingFailureCondition string
	BindingDelay            time.Duration
	BindingFailureNodes     []string
	// SkipNodeOperations of the simulated slices.
	SkipNodeOperations []string
}

// NewSimulatorOptions returns the defaults: simulator off.
func NewSimulatorOptions() *SimulatorOptions {
	return &SimulatorOptions{
		DevicesPerNode:    simulator.DefaultDevicesPerNode,
		Driver:            simulator.DefaultDriver,
		HeartbeatInterval: simulator.DefaultHeartbeatInterval,
		LeaseName:         "draplane-simulator",
		Pods:              true,

		BindingFailureCondition: simulator.DefaultBindingFailureCondition,
		BindingDelay:            time.Second,
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
	fs.BoolVar(&o.Pods, "simulate-pods", o.Pods,
		"Play kubelet for the pods bound to simulated nodes: prepare their claims and mark them Running. false leaves them Pending with unprepared claims, as nodes without a kubelet do (upstream's scheduler_perf runs its nodes so): for measuring placement alone. The nodes still report Ready and publish their slices.")
	fs.DurationVar(&o.HeartbeatInterval, "simulate-heartbeat-interval", o.HeartbeatInterval,
		"How often the simulated nodes are checked: a deleted one is registered again, a status that differs from the simulated one is reported again at once, an unchanged one every 5m (as a kubelet does).")
	fs.StringVar(&o.BindingCondition, "simulate-binding-condition", o.BindingCondition,
		"When set, every simulated device lists this condition in bindingConditions: a pod that gets one is bound only once the simulated driver sets it True in the claim's status.devices, --simulate-binding-delay after the allocation.")
	fs.StringVar(&o.BindingFailureCondition, "simulate-binding-failure-condition", o.BindingFailureCondition,
		"The bindingFailureConditions entry of the simulated devices (with --simulate-binding-condition).")
	fs.DurationVar(&o.BindingDelay, "simulate-binding-delay", o.BindingDelay,
		"How long after the allocation the simulated driver reports a device's binding condition (or its failure).")
	fs.StringSliceVar(&o.BindingFailureNodes, "simulate-binding-failure-nodes", o.BindingFailureNodes,
		"Simulated nodes (e.g. sim-node-0) whose devices report the binding failure condition instead of the binding condition: their claims are deallocated and the pods placed elsewhere.")
	fs.StringSliceVar(&o.SkipNodeOperations, "simulate-skip-node-operations", o.SkipNodeOperations,
		"The skipNodeOperations of the simulated slices (NodePrepareResources, NodeUnprepareResources, *): the simulated nodes do not call the driver for those operations. Needs --feature-gates=DRAOptionalNodeOperations=true.")
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
	if o.PodDuration > 0 && !o.Pods {
		errs = append(errs, errors.New("--simulate-pod-duration needs --simulate-pods: pods that never start cannot finish"))
	}
	if o.HeartbeatInterval <= 0 {
		errs = append(errs, errors.New("--simulate-heartbeat-interval must be positive"))
	}
	errs = append(errs, o.validateBinding()...)
	return append(errs, o.validateSkipNodeOperations()...)
}

// validateSkipNodeOperations checks the flag as the API checks the field,
// and that the API keeps it: with the gate off the field would be dropped
// from every slice the simulator writes.
func (o *SimulatorOptions) validateSkipNodeOperations() []error {
	if len(o.SkipNodeOperations) == 0 {
		return nil
	}
	if !features.Enabled(features.DRAOptionalNodeOperations) {
		return []error{errors.New("--simulate-skip-node-operations needs --feature-gates=DRAOptionalNodeOperations=true")}
	}
	valid := []string{string(resourcev1.SkipNodeOperationNodePrepareResources), string(resourcev1.SkipNodeOperationNodeUnprepareResources), string(resourcev1.SkipNodeOperationAll)}
	var errs []error
	for _, op := range o.SkipNodeOperations {
		if !slices.Contains(valid, op) {
			errs = append(errs, fmt.Errorf("--simulate-skip-node-operations: %q is not one of %s", op, strings.Join(valid, ", ")))
		}
	}
	if slices.Contains(o.SkipNodeOperations, valid[0]) && !slices.Contains(o.SkipNodeOperations, valid[1]) && !slices.Contains(o.SkipNodeOperations, valid[2]) {
		errs = append(errs, errors.New("--simulate-skip-node-operations: NodePrepareResources needs NodeUnprepareResources (or *)"))
	}
	return errs
}

// skipNodeOperations converts the validated flag.
func (o *SimulatorOptions) skipNodeOperations() []resourcev1.SkipNodeOperation {
	var out []resourcev1.SkipNodeOperation
	for _, op := range o.SkipNodeOperations {
		out = append(out, resourcev1.SkipNodeOperation(op))
	}
	return out
}

// validateBinding checks the binding condition flags as the API checks
// the conditions in a slice.
func (o *SimulatorOptions) validateBinding() []error {
	if o.BindingCondition == "" {
		if len(o.BindingFailureNodes) > 0 {
			return []error{errors.New("--simulate-binding-failure-nodes needs --simulate-binding-condition")}
		}
		return nil
	}
	var errs []error
	for flag, name := range map[string]string{"--simulate-binding-condition": o.BindingCondition, "--simulate-binding-failure-condition": o.BindingFailureCondition} {
		if msgs := metav1validation.ValidateLabelName(name, field.NewPath(flag)); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q must be a condition type (a label name): %v", flag, name, msgs.ToAggregate()))
		}
	}
	if o.BindingFailureCondition == o.BindingCondition {
		errs = append(errs, fmt.Errorf("--simulate-binding-failure-condition must differ from --simulate-binding-condition %q", o.BindingCondition))
	}
	if o.BindingDelay < 0 {
		errs = append(errs, fmt.Errorf("--simulate-binding-delay must not be negative, got %v", o.BindingDelay))
	}
	for _, node := range o.BindingFailureNodes {
		var i int
		if _, err := fmt.Sscanf(node, simulator.NodePrefix+"%d", &i); err != nil || simulator.NodeName(i) != node || i >= o.Nodes {
			errs = append(errs, fmt.Errorf("--simulate-binding-failure-nodes: %q is not one of the simulated nodes %s..%s", node, simulator.NodeName(0), simulator.NodeName(max(o.Nodes-1, 0))))
		}
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
			NoPods:            !o.Pods,

			BindingCondition:        o.BindingCondition,
			BindingFailureCondition: o.BindingFailureCondition,
			BindingDelay:            o.BindingDelay,
			BindingFailureNodes:     o.BindingFailureNodes,
			SkipNodeOperations:      o.skipNodeOperations(),
		},
		LeaseName: o.LeaseName,
	}
}
