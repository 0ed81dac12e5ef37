package app

import (
	"strings"
	"testing"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/draplane/draplane/internal/features"
)

func TestSimulatorOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		gateOn  bool // DRAOptionalNodeOperations
		modify  func(*SimulatorOptions)
		wantErr string
	}{
		{name: "defaults: off", modify: func(*SimulatorOptions) {}},
		{name: "four nodes", modify: func(o *SimulatorOptions) { o.Nodes = 4 }},
		{name: "negative nodes", modify: func(o *SimulatorOptions) { o.Nodes = -1 }, wantErr: "--simulate-nodes"},
		{name: "no devices", modify: func(o *SimulatorOptions) { o.DevicesPerNode = 0 }, wantErr: "--simulate-devices-per-node"},
		{name: "more devices than a slice holds", modify: func(o *SimulatorOptions) { o.DevicesPerNode = 129 }, wantErr: "--simulate-devices-per-node"},
		{name: "driver not a DNS subdomain", modify: func(o *SimulatorOptions) { o.Driver = "GPU_driver" }, wantErr: "--simulate-driver"},
		{name: "driver too long for a label value", modify: func(o *SimulatorOptions) { o.Driver = strings.Repeat("a", 60) + ".example.com" }, wantErr: "--simulate-driver"},
		{name: "negative pod duration", modify: func(o *SimulatorOptions) { o.PodDuration = -time.Second }, wantErr: "--simulate-pod-duration"},
		{name: "no pods", modify: func(o *SimulatorOptions) { o.Nodes, o.Pods = 2, false }},
		{name: "pod duration without pods", modify: func(o *SimulatorOptions) { o.Nodes, o.Pods, o.PodDuration = 2, false, time.Minute }, wantErr: "--simulate-pods"},
		{name: "no heartbeat", modify: func(o *SimulatorOptions) { o.HeartbeatInterval = 0 }, wantErr: "--simulate-heartbeat-interval"},
		{name: "binding conditions", modify: func(o *SimulatorOptions) {
			o.Nodes, o.BindingCondition, o.BindingFailureNodes = 2, "example.com/Attached", []string{"sim-node-1"}
		}},
		{name: "binding condition not a condition type", modify: func(o *SimulatorOptions) { o.Nodes, o.BindingCondition = 1, "not attached" }, wantErr: "--simulate-binding-condition"},
		{name: "failure condition same as the condition", modify: func(o *SimulatorOptions) {
			o.Nodes, o.BindingCondition, o.BindingFailureCondition = 1, "Attached", "Attached"
		}, wantErr: "must differ"},
		{name: "negative binding delay", modify: func(o *SimulatorOptions) { o.Nodes, o.BindingCondition, o.BindingDelay = 1, "Attached", -time.Second }, wantErr: "--simulate-binding-delay"},
		{name: "failure node not simulated", modify: func(o *SimulatorOptions) {
			o.Nodes, o.BindingCondition, o.BindingFailureNodes = 2, "Attached", []string{"sim-node-2"}
		}, wantErr: "--simulate-binding-failure-nodes"},
		{name: "failure nodes without a condition", modify: func(o *SimulatorOptions) { o.Nodes, o.BindingFailureNodes = 2, []string{"sim-node-1"} }, wantErr: "--simulate-binding-condition"},
		{name: "skip node operations", gateOn: true, modify: func(o *SimulatorOptions) { o.Nodes, o.SkipNodeOperations = 1, []string{"*"} }},
		{name: "skip node operations with the gate off", modify: func(o *SimulatorOptions) { o.Nodes, o.SkipNodeOperations = 1, []string{"*"} }, wantErr: "DRAOptionalNodeOperations=true"},
		{name: "skip an unknown operation", gateOn: true, modify: func(o *SimulatorOptions) { o.Nodes, o.SkipNodeOperations = 1, []string{"NodeReboot"} }, wantErr: `"NodeReboot"`},
		{name: "skip prepare but not unprepare", gateOn: true, modify: func(o *SimulatorOptions) {
			o.Nodes, o.SkipNodeOperations = 1, []string{"NodePrepareResources"}
		}, wantErr: "needs NodeUnprepareResources"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAOptionalNodeOperations, tc.gateOn)
			o := NewSimulatorOptions()
			tc.modify(o)
			errs := o.Validate()
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", errs)
			case tc.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr)):
				t.Errorf("errors %v, want one about %s", errs, tc.wantErr)
			}
		})
	}
}
