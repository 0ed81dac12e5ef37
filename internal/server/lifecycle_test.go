package server

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/deprecation"
	baseversion "k8s.io/component-base/version"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
)

// TestLifecycle checks that the API server's deprecation logic, which
// compares the lifecycle methods with the component-base version of the
// binary, warns about every v1beta1 kind in the builds we make: release
// builds stamp 0.<minor> with -ldflags, tests and `go build` without
// ldflags report no version at all (then every deprecated kind warns).
// v1 never warns.
func TestLifecycle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := resourcev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := resourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}

	// The version this test binary reports: built without ldflags.
	devMajor, devMinor, _ := deprecation.MajorMinor(baseversion.Get())
	releaseMajor, releaseMinor, err := deprecation.MajorMinor(version.Info{Major: "0", Minor: "1"})
	if err != nil {
		t.Fatal(err)
	}
	builds := []struct {
		name         string
		major, minor int
	}{
		{"dev build without ldflags", devMajor, devMinor},
		{"release 0.1", releaseMajor, releaseMinor},
		{"release 0.2", 0, 2},
	}

	kinds := 0
	for gvk, typ := range scheme.AllKnownTypes() {
		// Only our kinds, not the option types registered with them.
		if !strings.HasPrefix(typ.PkgPath(), "github.com/draplane/draplane/apis/") {
			continue
		}
		kinds++
		obj, err := scheme.New(gvk)
		if err != nil {
			t.Fatal(err)
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		for _, build := range builds {
			t.Run(gvk.Version+"/"+gvk.Kind+"/"+build.name, func(t *testing.T) {
				deprecated := deprecation.IsDeprecated(obj, build.major, build.minor)
				switch gvk.Version {
				case resourcev1beta1.SchemeGroupVersion.Version:
					if !deprecated {
						t.Fatalf("%s is not deprecated at %d.%d", gvk, build.major, build.minor)
					}
					want := schema.GroupVersionKind{Group: gvk.Group, Version: "v1", Kind: gvk.Kind}.String()
					msg := deprecation.WarningMessage(obj)
					if !strings.Contains(msg, "is deprecated in v0.1+") || !strings.Contains(msg, "unavailable in v0.3+") {
						t.Errorf("warning %q does not name the deprecation and removal releases", msg)
					}
					replacement := obj.(interface {
						APILifecycleReplacement() schema.GroupVersionKind
					}).APILifecycleReplacement()
					if replacement.String() != want {
						t.Errorf("replacement %s, want %s", replacement, want)
					}
				default:
					if deprecated {
						t.Errorf("%s is deprecated", gvk)
					}
				}
			})
		}
	}
	if kinds != 20 {
		t.Errorf("checked %d kinds, want 20 (v1: 6 kinds and their lists, v1beta1: 4 and their lists)", kinds)
	}
}
