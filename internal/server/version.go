package server

import (
	"fmt"
	"runtime/debug"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
)

// servedVersion is what /version reports: the Kubernetes version whose API
// the server implements, with our own release beside it in the build
// metadata, as k3s reports v1.37.1+k3s1. Clients such as kubectl compare
// gitVersion with their own Kubernetes version; our 0.x release there
// made them warn of a version skew that does not exist. Everything else
// (the binary's own --version, API lifecycle by our release) reads the
// component-base version variables, which stay ours.
type servedVersion struct {
	basecompatibility.EffectiveVersion
}

// Info implements basecompatibility.EffectiveVersion.
func (v servedVersion) Info() *apimachineryversion.Info {
	info := v.EffectiveVersion.Info()
	if info == nil {
		return nil
	}
	info.GitVersion = kubeGitVersion(info.Major, info.Minor, apiserverPatch(), baseversion.Get().GitVersion)
	return info
}

// kubeGitVersion is "v<major>.<minor>.<patch>+draplane.<ours>", ours made
// fit for semver build metadata (dot-separated [0-9A-Za-z-]).
func kubeGitVersion(major, minor string, patch int, ours string) string {
	v := fmt.Sprintf("v%s.%s.%d+draplane", major, minor, patch)
	if ours == "" || strings.Contains(ours, "$Format") {
		// A build without our version stamped in.
		return v
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '.':
			return r
		}
		return '.'
	}, ours)
	var parts []string
	for _, p := range strings.Split(clean, ".") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return v
	}
	return v + "." + strings.Join(parts, ".")
}

// apiserverPatch is the patch release of the k8s.io/apiserver module built
// in (v0.37.2 is Kubernetes v1.37.2), 0 when unknown.
func apiserverPatch() int {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return 0
	}
	for _, dep := range info.Deps {
		if dep.Path != "k8s.io/apiserver" {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		var major, minor, patch int
		if _, err := fmt.Sscanf(dep.Version, "v%d.%d.%d", &major, &minor, &patch); err == nil {
			return patch
		}
	}
	return 0
}
