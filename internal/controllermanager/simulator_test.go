package controllermanager

import (
	"net/http"
	"testing"

	"github.com/draplane/draplane/internal/simulator"
)

// TestSimulatorReadyz: /readyz waits until this replica registered the
// simulated nodes, or another replica runs the simulator.
func TestSimulatorReadyz(t *testing.T) {
	tests := []struct {
		name                string
		seeded, otherLeader bool
		wantReady           bool
	}{
		{name: "starting"},
		{name: "seeded", seeded: true, wantReady: true},
		{name: "another replica leads", otherLeader: true, wantReady: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Config{Simulator: &SimulatorConfig{}})
			m.simulator.seeded.Store(tc.seeded)
			m.simulator.otherLeader.Store(tc.otherLeader)
			check := m.SimulatorReadyzCheck()
			if check.Name() != "simulator" {
				t.Errorf("check name %q", check.Name())
			}
			req, _ := http.NewRequest(http.MethodGet, "/readyz", nil)
			if err := check.Check(req); (err == nil) != tc.wantReady {
				t.Errorf("check error %v, want ready=%v", err, tc.wantReady)
			}
		})
	}
}

// TestSimulatorClientBudget: the simulator's clients may make the requests
// of as many kubelets as it simulates nodes, and at least the
// controllers'.
func TestSimulatorClientBudget(t *testing.T) {
	tests := []struct {
		nodes     int
		wantQPS   float32
		wantBurst int
	}{
		{nodes: 1, wantQPS: 500, wantBurst: 1000},
		{nodes: 4, wantQPS: 500, wantBurst: 1000},
		{nodes: 500, wantQPS: 25000, wantBurst: 50000},
		{nodes: 5000, wantQPS: 250000, wantBurst: 500000},
	}
	for _, tc := range tests {
		m := New(Config{ClientQPS: 500, ClientBurst: 1000, Simulator: &SimulatorConfig{Options: simulator.Options{Nodes: tc.nodes}}})
		if qps, burst := m.simulatorClientBudget(); qps != tc.wantQPS || burst != tc.wantBurst {
			t.Errorf("%d nodes: qps %v burst %d, want %v and %d", tc.nodes, qps, burst, tc.wantQPS, tc.wantBurst)
		}
	}
}
