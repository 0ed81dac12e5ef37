// Package testenv holds what tests need of the machine they run on: the
// repository's root, free loopback ports, polling until a condition holds,
// and running kubectl.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// RepoRoot is the root of the repository (the module's directory).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// wellKnownPorts are left to the servers that default to them (etcd's
// client and peer ports, kube-apiserver's), which some tests also run.
var wellKnownPorts = map[int]bool{2379: true, 2380: true, 6443: true}

// FreePort asks the kernel for a free loopback port that is none of the
// well-known ports of etcd and kube-apiserver.
func FreePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		if !wellKnownPorts[port] {
			return port, nil
		}
	}
}

// MustFreePort is FreePort that fails the test on error.
func MustFreePort(t testing.TB) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// WaitFor polls the condition until it holds and fails the test when it
// returns an error or timeout passes. NotFound counts as "not yet". The
// timeout only keeps a broken component from hanging the test run;
// nothing depends on how fast the condition comes to hold.
func WaitFor(ctx context.Context, t testing.TB, timeout time.Duration, what string, condition func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		done, err := condition()
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Kubectl runs the kubectl binary with flags (where the server is, which
// cache) and args, with stdin as its input unless empty, and returns its
// standard output and its standard error (where warnings go) apart. An
// error names the args and carries both outputs.
func Kubectl(ctx context.Context, binary string, flags []string, stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, binary, append(append([]string{}, flags...), args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), nil
}
