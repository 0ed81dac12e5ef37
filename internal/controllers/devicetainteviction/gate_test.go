package devicetainteviction

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

// TestDeviceTaintRulesGate: with DRADeviceTaintRules off, as upstream, the
// controller neither evicts for a rule nor writes a rule's status; taints
// in slices still evict.
func TestDeviceTaintRulesGate(t *testing.T) {
	broken := noExecute("example.com/broken")
	tests := map[string]struct {
		rulesOff        bool
		objects         testObjects
		wantDeleted     []string
		wantRuleWritten bool
	}{
		"rule, gate on: evicted, status written": {
			objects:     testObjects{rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", broken)}, slices: []*resourcev1.ResourceSlice{slice("s", 1, 1)}},
			wantDeleted: []string{"a"}, wantRuleWritten: true,
		},
		"rule, gate off: ignored": {
			rulesOff: true,
			objects:  testObjects{rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", broken)}, slices: []*resourcev1.ResourceSlice{slice("s", 1, 1)}},
		},
		"slice taint, gate off: evicted": {
			rulesOff:    true,
			objects:     testObjects{slices: []*resourcev1.ResourceSlice{slice("s", 1, 1, broken)}},
			wantDeleted: []string{"a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRADeviceTaintRules, !tc.rulesOff)
			tc.objects.pods = []*corev1.Pod{pod("a")}
			tc.objects.claims = []*resourcev1.ResourceClaim{claim("claim-a", []string{"gpu-0"}, consumer("a"))}
			e := newTestEnv(t, Options{}, tc.objects)
			e.drain()
			// Let every delayed item run, status writes included.
			e.advance(DefaultStatusUpdateInterval)
			if deleted := e.deletedPods(); !slices.Equal(deleted, tc.wantDeleted) {
				t.Errorf("deleted pods %v, want %v", deleted, tc.wantDeleted)
			}
			if written := e.statusWrites() > 0; written != tc.wantRuleWritten {
				t.Errorf("rule status written: %v, want %v", written, tc.wantRuleWritten)
			}
		})
	}
}
