package allocation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
)

// TestNominationsCollector: the running controller's nominations are
// counted when scraped, and nothing is reported once it stopped.
func TestNominationsCollector(t *testing.T) {
	const name = "draplane_allocation_controller_nominations"
	const header = `
# HELP draplane_allocation_controller_nominations [ALPHA] Number of pods holding a nomination: devices on a node kept for a preemptor (or a gang member) while its victims go. Absent while the controller does not run.
# TYPE draplane_allocation_controller_nominations gauge
`
	s := newPlacementState(placementInputs{})
	s.nominations[types.UID("a")] = &nomination{podUID: "a"}
	s.nominations[types.UID("b")] = &nomination{podUID: "b"}

	tests := []struct {
		name    string
		running *placementState
		want    string
	}{
		{name: "running with two", running: s, want: header + name + " 2\n"},
		{name: "stopped", running: nil, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runningState.Store(tc.running)
			t.Cleanup(func() { runningState.Store(nil) })
			if err := testutil.CustomCollectAndCompare(&nominationsCollector{}, strings.NewReader(tc.want), name); err != nil {
				t.Error(err)
			}
		})
	}
}
