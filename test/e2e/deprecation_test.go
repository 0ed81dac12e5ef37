package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/draplane/draplane/internal/testing/testenv"
)

// TestDeprecatedVersionWarns drives the real binary (stamped 0.1 with
// -ldflags, as release builds are) with kubectl: every request to v1beta1
// carries the deprecation Warning header, which kubectl prints on stderr;
// v1 gets none.
func TestDeprecatedVersionWarns(t *testing.T) {
	s := sharedServer(t)
	requireKubectl(t)
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: deprecation-claim
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
`, "apply", "-f", "-")

	kubectl := func(t *testing.T, args ...string) (stdout, stderr string) {
		t.Helper()
		stdout, stderr, err := testenv.Kubectl(context.Background(), kubectlPath, s.kubectlFlags(), "", args...)
		if err != nil {
			t.Fatal(err)
		}
		return stdout, stderr
	}

	tests := []struct {
		resource, kind, version string
		args                    []string
		wantWarning             string
	}{
		{resource: "resourceclaims", kind: "ResourceClaim", version: "v1beta1", args: []string{"-n", "default", "deprecation-claim"},
			wantWarning: "Warning: resource.draplane.dev/v1beta1 ResourceClaim is deprecated in v0.1+, unavailable in v0.3+; use resource.draplane.dev/v1 ResourceClaim"},
		{resource: "resourceclaims", kind: "ResourceClaim", version: "v1", args: []string{"-n", "default", "deprecation-claim"}},
		{resource: "deviceclasses", kind: "DeviceClass", version: "v1beta1",
			wantWarning: "Warning: resource.draplane.dev/v1beta1 DeviceClass is deprecated in v0.1+, unavailable in v0.3+; use resource.draplane.dev/v1 DeviceClass"},
		{resource: "resourceclaimtemplates", kind: "ResourceClaimTemplate", version: "v1beta1", args: []string{"-A"},
			wantWarning: "Warning: resource.draplane.dev/v1beta1 ResourceClaimTemplate is deprecated in v0.1+"},
		{resource: "resourceslices", kind: "ResourceSlice", version: "v1beta1",
			wantWarning: "Warning: resource.draplane.dev/v1beta1 ResourceSlice is deprecated in v0.1+"},
		{resource: "resourceslices", kind: "ResourceSlice", version: "v1"},
		{resource: "devicetaintrules", kind: "DeviceTaintRule", version: "v1"},
	}
	for _, tc := range tests {
		t.Run(tc.resource+"."+tc.version, func(t *testing.T) {
			stdout, stderr := kubectl(t, append([]string{"get", tc.resource + "." + tc.version + ".resource.draplane.dev"}, tc.args...)...)
			if tc.resource == "resourceclaims" && !strings.Contains(stdout, "deprecation-claim") {
				t.Errorf("the claim is not listed:\n%s", stdout)
			}
			if tc.wantWarning == "" {
				if strings.Contains(stderr, "Warning") {
					t.Errorf("unexpected warning for %s:\n%s", tc.version, stderr)
				}
				return
			}
			if !strings.Contains(stderr, tc.wantWarning) {
				t.Errorf("kubectl did not print %q; stderr:\n%s", tc.wantWarning, stderr)
			}
		})
	}
}
