// Command dra-apiserver is the draplane control plane. Everything but
// building the command lives in package server.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/draplane/draplane/server"
)

func main() {
	os.Exit(cli.Run(server.NewCommand()))
}
