package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRepoRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(RepoRoot(), "go.mod")); err != nil {
		t.Errorf("no go.mod at the repository root %s: %v", RepoRoot(), err)
	}
}

func TestFreePort(t *testing.T) {
	if port := MustFreePort(t); port <= 0 || wellKnownPorts[port] {
		t.Errorf("port %d", port)
	}
}

func TestWaitFor(t *testing.T) {
	calls := 0
	WaitFor(t.Context(), t, time.Minute, "the third call", func() (bool, error) {
		calls++
		return calls == 3, nil
	})
	if calls != 3 {
		t.Errorf("%d calls, want 3", calls)
	}
}

// TestKubectl runs the real kubectl: output and error apart, and an error
// that names the arguments and carries the output. (Input on stdin needs a
// server; the e2e tests apply manifests that way.)
func TestKubectl(t *testing.T) {
	binary, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH")
	}
	ctx := context.Background()
	stdout, _, err := Kubectl(ctx, binary, []string{"--kubeconfig=/dev/null"}, "", "version", "--client", "-o", "json")
	if err != nil || !strings.Contains(stdout, "clientVersion") {
		t.Errorf("version: %q, %v", stdout, err)
	}
	_, stderr, err := Kubectl(ctx, binary, nil, "", "no-such-command")
	if err == nil || !strings.Contains(err.Error(), "kubectl no-such-command") || !strings.Contains(err.Error(), stderr) || stderr == "" {
		t.Errorf("failing command: stderr %q, err %v", stderr, err)
	}
}
