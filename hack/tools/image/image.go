package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is where the server lives in the image and what the
	// entrypoint runs.
	binaryPath = "/usr/local/bin/dra-apiserver"
	// uid and gid of the user the image runs as: the "nonroot" user of
	// distroless images, which deploy/'s securityContext names too.
	uid = 65532
	gid = 65532
	// dataDir is the default --data-dir in deploy/, owned by the user so
	// that the server also runs without a volume mounted there.
	dataDir = "/var/lib/draplane"
)

type options struct {
	binary, ref, version, revision, ociDir, tarball string
}

// build assembles the image. Every timestamp is the Unix epoch, so the same
// binary always gives the same digest.
func build(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "hack/tools/image: dra-apiserver " + o.version, Created: v1.Time{Time: time.Unix(0, 0).UTC()}},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	if arch := os.Getenv("GOARCH"); arch != "" {
		cf.Architecture = arch
	}
	cf.OS = "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		Entrypoint: []string{binaryPath},
		User:       fmt.Sprintf("%d:%d", uid, gid),
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		ExposedPorts: map[string]struct{}{
			"6443/tcp": {},
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "dra-apiserver",
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.revision,
			"org.opencontainers.image.source":   "https://github.com/draplane/draplane",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs returns the single layer: the binary, passwd/group naming the
// non-root user, and the directories the server needs (a writable /tmp and
// the data dir).
func rootfs(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	dir := func(path string, mode int64, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode, Uid: owner, Gid: owner, ModTime: epoch})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)))
		},
		func() error { return file("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", gid))) },
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, uid) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
		func() error { return file(binaryPath[1:], 0o755, bin) },
		func() error { return dir("var", 0o755, 0) },
		func() error { return dir("var/lib", 0o755, 0) },
		func() error { return dir(dataDir[1:], 0o700, uid) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout replaces dir with an OCI image layout holding img, tagged
// with ref's tag in the standard ref.name annotation.
func writeLayout(dir, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	}))
}

func writeTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}
