package features

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// The defaults are upstream's at 1.37 (pkg/features of k8s.io/kubernetes
// v1.37.1), the version dra-apiserver emulates.
func TestDefaultsAre137(t *testing.T) {
	want := map[featuregate.Feature]bool{
		DRAAdminAccess:               true,
		DRAConsumableCapacity:        true,
		DRADerivedAttributes:         false,
		DRADeviceBindingConditions:   true,
		DRADeviceCompatibilityGroups: false,
		DRADeviceTaintRules:          true,
		DRADeviceTaints:              true,
		DRAExtendedResource:          true,
		// On by default only with --min-compatibility-version=1.37; the
		// default minimum compatibility of a 1.37 server is 1.36.
		DRAFractionalCapacityRange:   false,
		DRAListTypeAttributes:        false,
		DRANodeAllocatableResources:  false,
		DRAOptionalNodeOperations:    false,
		DRAPartitionableDevices:      true,
		DRAPartitionableDevicesType:  false,
		DRAPrioritizedList:           true,
		DRAResourceClaimDeviceStatus: true,
		DRAWorkloadResourceClaims:    false,
		GenericWorkload:              false,
		// Alpha in 1.36, unchanged in 1.37.
		TopologyAwareWorkloadScheduling: false,
	}
	if len(want) != len(Known()) {
		t.Errorf("%d gates known, %d in this table", len(Known()), len(want))
	}
	for f, on := range want {
		if got := Enabled(f); got != on {
			t.Errorf("%s: enabled %v, upstream's 1.37 default is %v", f, got, on)
		}
	}
}

func TestFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   string
		wantErr bool
		check   featuregate.Feature
		want    bool
	}{
		{name: "alpha on", value: "DRAListTypeAttributes=true", check: DRAListTypeAttributes, want: true},
		{name: "beta off", value: "DRADeviceBindingConditions=false", check: DRADeviceBindingConditions, want: false},
		{name: "locked GA off", value: "DRAExtendedResource=false", wantErr: true},
		{name: "unknown", value: "DRANoSuchGate=true", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			gate.AddFlag(fs)
			err := fs.Parse([]string{"--feature-gates=" + tc.value})
			if (err != nil) != tc.wantErr {
				t.Fatalf("parse %q: error %v, want error %v", tc.value, err, tc.wantErr)
			}
			if err == nil && gate.Enabled(tc.check) != tc.want {
				t.Errorf("%s after %q: %v, want %v", tc.check, tc.value, gate.Enabled(tc.check), tc.want)
			}
		})
	}
}

// TestEmulatesKubernetesInStampedBuilds: a gate set to the version of a
// binary stamped with our 0.x release (as k8s.io/apiserver does) emulates
// Kubernetes 1.37 again, and --feature-gates is read against that.
func TestEmulatesKubernetesInStampedBuilds(t *testing.T) {
	gate := featuregate.NewFeatureGate()
	if err := gate.AddVersioned(versioned); err != nil {
		t.Fatal(err)
	}
	if err := gate.SetEmulationVersionAndMinCompatibilityVersion(version.MustParse("0.1"), version.MustParse("0.0")); err != nil {
		t.Fatal(err)
	}
	if gate.Enabled(DRAExtendedResource) {
		t.Fatal("DRAExtendedResource on while emulating 0.1: the test does not set up a stamped build")
	}
	if err := emulateKubernetes(gate); err != nil {
		t.Fatal(err)
	}
	// --feature-gates is parsed after init.
	if err := gate.Set("DRAListTypeAttributes=true"); err != nil {
		t.Fatal(err)
	}
	if got := gate.EmulationVersion().String(); got != "1.37" {
		t.Errorf("emulation version %s, want 1.37", got)
	}
	for f, want := range map[featuregate.Feature]bool{DRAExtendedResource: true, DRAListTypeAttributes: true, DRADerivedAttributes: false} {
		if got := gate.Enabled(f); got != want {
			t.Errorf("%s: enabled %v, want %v", f, got, want)
		}
	}
}

// TestREADMEListsTheGates: the README's gate table names every gate of
// this package, with its default.
func TestREADMEListsTheGates(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[featuregate.Feature]string{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !isGate(strings.TrimSpace(cells[1])) {
			continue
		}
		listed[featuregate.Feature(strings.TrimSpace(cells[1]))] = strings.TrimRight(strings.TrimSpace(cells[3]), "¹")
	}
	for _, f := range Known() {
		want := map[bool]string{true: "on", false: "off"}[Enabled(f)]
		if got, ok := listed[f]; !ok {
			t.Errorf("README does not list %s", f)
		} else if got != want {
			t.Errorf("README lists %s with default %q, the gate's default is %q", f, got, want)
		}
		delete(listed, f)
	}
	for f := range listed {
		t.Errorf("README lists %s, which is not a gate of this package", f)
	}
}

// isGate: a table cell that names a gate of this package.
func isGate(cell string) bool {
	for _, f := range Known() {
		if string(f) == cell {
			return true
		}
	}
	return strings.HasPrefix(cell, "DRA")
}
