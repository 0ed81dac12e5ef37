// Command dra-apiserver is the draplane control plane. Everything but
// building the command lives in package app (the command and its options)
// and the packages it builds on.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/draplane/draplane/cmd/dra-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
