package app

import (
	"strings"
	"testing"
	"time"
)

func TestSimulatorOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
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
		{name: "no heartbeat", modify: func(o *SimulatorOptions) { o.HeartbeatInterval = 0 }, wantErr: "--simulate-heartbeat-interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
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
