package controllermanager

import (
	"net/http"
	"testing"
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
