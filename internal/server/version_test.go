package server

import (
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func TestKubeGitVersion(t *testing.T) {
	for _, tc := range []struct {
		ours, want string
	}{
		{"v0.1.0-dev", "v1.37.2+draplane.v0.1.0-dev"},
		{"v0.2.0", "v1.37.2+draplane.v0.2.0"},
		{"v0.2.0+dirty", "v1.37.2+draplane.v0.2.0.dirty"},
		{"v0.0.0-master+$Format:%H$", "v1.37.2+draplane"},
		{"", "v1.37.2+draplane"},
	} {
		got := kubeGitVersion("1", "37", 2, tc.ours)
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.ours, got, tc.want)
		}
		v, err := utilversion.ParseSemantic(got)
		if err != nil || v.Major() != 1 || v.Minor() != 37 {
			t.Errorf("%q: %q is not Kubernetes 1.37 to a client: %v", tc.ours, got, err)
		}
	}
}

// TestServedVersion: /version has the Kubernetes minor this server
// implements in gitVersion, so clients that compare versions see no skew
// from our own 0.x release.
func TestServedVersion(t *testing.T) {
	info := servedVersion{kubeEffectiveVersion()}.Info()
	v, err := utilversion.ParseSemantic(info.GitVersion)
	if err != nil {
		t.Fatal(err)
	}
	if info.Major != "1" || v.Major() != 1 || v.Minor() != kubeEffectiveVersion().BinaryVersion().Minor() {
		t.Errorf("gitVersion %q, major %q minor %q: not the Kubernetes version implemented", info.GitVersion, info.Major, info.Minor)
	}
}
