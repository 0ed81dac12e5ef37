package e2e

import (
	"debug/buildinfo"
	"slices"
	"strings"
	"testing"

	"github.com/draplane/draplane/test/launcher"
)

// TestBuildTags: the binary under test is built with the Makefile's build
// tags, among them fieldsv1string, under which k8s.io/apimachinery keeps a
// managedFields field set as an interned string: the watch caches then
// hold one copy of equal ones instead of one per object version.
func TestBuildTags(t *testing.T) {
	info, err := buildinfo.ReadFile(serverBinary)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, setting := range info.Settings {
		if setting.Key == "-tags" {
			tags = strings.Split(setting.Value, ",")
		}
	}
	for _, want := range strings.Split(launcher.BuildTags, ",") {
		if !slices.Contains(tags, want) {
			t.Errorf("%s built with tags %q, want %s among them", serverBinary, tags, want)
		}
	}
	if !slices.Contains(tags, "fieldsv1string") {
		t.Errorf("%s built without fieldsv1string (tags %q)", serverBinary, tags)
	}
}
