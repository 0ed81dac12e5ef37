package app

import (
	"bytes"
	"regexp"
	"slices"
	"testing"
)

// helpFlag matches a flag's line in help output: "  -o, --output string"
// or "      --node-name string".
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9_-]*)`)

// TestSubcommandHelp runs each subcommand's --help and checks that it
// shows exactly the flags the subcommand reads, each defined on the
// subcommand itself: none of the server's (etcd, audit, admission, TLS,
// feature gates), which a subcommand does not parse.
func TestSubcommandHelp(t *testing.T) {
	logging := []string{"log-flush-frequency", "logging-format", "v", "vmodule"}
	tests := map[string][]string{
		"node-agent": append([]string{"allocatable", "checkpoint", "data-dir", "deregistration-grace-period", "driver", "feature-gates", "kubeconfig",
			"node-name", "plugin-registration-dir", "resource-api", "workers"}, logging...),
		"client-kubeconfig": {"data-dir", "group", "output", "server", "user"},
		"version":           {"output"},
	}
	for _, sub := range NewCommand().Commands() {
		if _, ok := tests[sub.Name()]; !ok {
			t.Errorf("subcommand %s is not tested: add the flags it reads", sub.Name())
		}
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs([]string{name, "--help"})
			if err := cmd.Execute(); err != nil {
				t.Fatalf("%s --help: %v", name, err)
			}
			sub, _, err := cmd.Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			var shown []string
			for _, m := range helpFlag.FindAllStringSubmatch(out.String(), -1) {
				shown = append(shown, m[1])
				if !slices.Contains(want, m[1]) {
					t.Errorf("%s --help shows --%s, which it does not read", name, m[1])
				}
				if sub.LocalFlags().Lookup(m[1]) == nil {
					t.Errorf("%s --help shows --%s, which it does not define", name, m[1])
				}
			}
			for _, flag := range want {
				if !slices.Contains(shown, flag) {
					t.Errorf("%s --help does not show --%s", name, flag)
				}
			}
		})
	}
}
