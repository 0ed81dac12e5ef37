// Command image writes a container image of dra-apiserver without a
// container engine: one layer holding a static binary, a passwd and group
// file for the non-root user it runs as, and the directories the server
// writes to; no base image, so nothing is pulled. It writes an OCI image
// layout (a directory) and a docker-archive tarball (`docker load`,
// `crane push`). `make image` builds the binary and calls it.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "path of a static (CGO_ENABLED=0) dra-apiserver binary")
	flag.StringVar(&o.ref, "ref", "ghcr.io/draplane/dra-apiserver:v0.1.0-dev", "image reference recorded in the layout and the tarball")
	flag.StringVar(&o.version, "version", "", "version label (org.opencontainers.image.version)")
	flag.StringVar(&o.revision, "revision", "", "source revision label (org.opencontainers.image.revision)")
	flag.StringVar(&o.ociDir, "oci", "", "write an OCI image layout into this directory (replaced)")
	flag.StringVar(&o.tarball, "tarball", "", "write a docker-archive tarball to this file")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.binary == "" || (o.ociDir == "" && o.tarball == "") {
		return fmt.Errorf("-binary and one of -oci or -tarball are required")
	}
	img, err := build(o)
	if err != nil {
		return err
	}
	if o.ociDir != "" {
		if err := writeLayout(o.ociDir, o.ref, img); err != nil {
			return err
		}
		fmt.Println("wrote OCI layout", o.ociDir)
	}
	if o.tarball != "" {
		if err := writeTarball(o.tarball, o.ref, img); err != nil {
			return err
		}
		fmt.Println("wrote tarball", o.tarball)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", o.ref, digest)
	return nil
}
