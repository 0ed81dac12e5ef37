package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestMakeImage runs `make image` into a temporary directory, reads the
// OCI layout and the tarball back, and runs the binary found inside.
func TestMakeImage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to test `make image`: %v", err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const ref = "registry.example/draplane/dra-apiserver:v9.8.7-test"
	cmd := exec.Command("make", "-C", root, "--no-print-directory", "image",
		"IMAGE_OUT="+out, "IMAGE="+ref, "VERSION=v9.8.7-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, b)
	}

	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 {
		t.Fatalf("the layout holds %d manifests, want 1", len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "v9.8.7-test" {
		t.Errorf("ref.name annotation %q, want the tag v9.8.7-test", got)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img, "v9.8.7-test")

	// The tarball holds the same image under the full reference.
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(filepath.Join(out, "dra-apiserver.tar"), &tag)
	if err != nil {
		t.Fatalf("reading the tarball: %v", err)
	}
	// A docker archive carries no manifest of its own (it is rebuilt on
	// load), so compare what identifies the content: the config.
	want, _ := img.ConfigName()
	if got, err := fromTar.ConfigName(); err != nil || got != want {
		t.Errorf("tarball image config %v (%v), want the layout's %v", got, err, want)
	}
}

func checkImage(t *testing.T, img v1.Image, version string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != binaryPath {
		t.Errorf("entrypoint %q, want %q", got, binaryPath)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("version label %q, want %q", got, version)
	}
	if cf.Config.Labels["org.opencontainers.image.revision"] == "" {
		t.Error("revision label is empty")
	}

	files := readRootfs(t, img)
	passwd, ok := files["etc/passwd"]
	if !ok || !strings.Contains(string(passwd.data), ":65532:65532:") {
		t.Errorf("etc/passwd does not name user 65532: %q", passwd.data)
	}
	data, ok := files["var/lib/draplane"]
	if !ok || data.hdr.Uid != 65532 {
		t.Errorf("var/lib/draplane is missing or not owned by 65532: %+v", data.hdr)
	}
	bin, ok := files[strings.TrimPrefix(binaryPath, "/")]
	if !ok {
		t.Fatalf("%s is not in the image", binaryPath)
	}
	if bin.hdr.Mode&0o111 == 0 {
		t.Errorf("%s is not executable: mode %o", binaryPath, bin.hdr.Mode)
	}
	path := filepath.Join(t.TempDir(), "dra-apiserver")
	if err := os.WriteFile(path, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	checkStatic(t, path)
	out, err := exec.Command(path, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", binaryPath, err, out)
	}
	if !strings.Contains(string(out), version) {
		t.Errorf("`dra-apiserver version` printed %q, want it to name %s", out, version)
	}
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// readRootfs flattens the image's layers into path -> entry, without
// leading or trailing slashes.
func readRootfs(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "/"), "/")] = entry{hdr: hdr, data: data}
	}
	return files
}

// checkStatic fails when the binary asks for a dynamic loader: the image
// has no libc.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary is dynamically linked (has an ELF interpreter); the image has no libc")
		}
	}
}
