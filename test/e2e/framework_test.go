// Package e2e drives the real dra-apiserver binary with /usr/bin/kubectl and
// the generated clientset. TestMain builds the binary once; each server
// runs on its own temp data dir and a free port.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/internal/testing/skipnote"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/launcher"
)

const (
	// e2eVersion is stamped into the test binary with -ldflags.
	e2eVersion = "v0.1.0-e2e"
	// readyTimeout is generous: the machine is shared and slow.
	readyTimeout = 3 * time.Minute
	// pollTimeout bounds every "wait until" in the tests.
	pollTimeout = 2 * time.Minute
)

var (
	// serverBinary is the dra-apiserver built by TestMain.
	serverBinary string
	// repoRoot is the module root (examples/ lives there).
	repoRoot string
	// kubectlPath is the kubectl the tests drive.
	kubectlPath = "/usr/bin/kubectl"
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	repoRoot = testenv.RepoRoot()
	if path := os.Getenv("KUBECTL"); path != "" {
		kubectlPath = path
	} else if _, err := os.Stat(kubectlPath); err != nil {
		// Not at the usual place: take the one on PATH, if any.
		if path, err := exec.LookPath("kubectl"); err == nil {
			kubectlPath = path
		} else {
			kubectlPath = ""
		}
	}
	if kubectlPath == "" && os.Getenv("CI") == "" {
		skipnote.Print("test/e2e", "the tests that drive kubectl skip: no kubectl at /usr/bin/kubectl or on PATH (set KUBECTL); in CI they fail instead")
	}
	dir, err := os.MkdirTemp("", "draplane-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBinary = filepath.Join(dir, "dra-apiserver")
	err = launcher.Build("./cmd/dra-apiserver", serverBinary,
		"-X k8s.io/component-base/version.gitVersion="+e2eVersion,
		"-X k8s.io/component-base/version.gitMajor=0",
		"-X k8s.io/component-base/version.gitMinor=1",
		"-X k8s.io/component-base/version.gitTreeState=clean",
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	sharedServerStop()
	return code
}

// testServer is one running dra-apiserver process on a free port.
type testServer struct {
	*launcher.Server
	dataDir string
	// args are the flags of the next start, after the data dir and port.
	args []string
}

// newTestServer describes a server on dataDir; it runs after start.
func newTestServer(dataDir string, extraArgs ...string) *testServer {
	return &testServer{Server: launcher.NewServer("dra-apiserver", serverBinary, dataDir, 0), dataDir: dataDir, args: extraArgs}
}

// startServer starts dra-apiserver on dataDir with a free port and waits
// until /readyz answers 200. The process is killed when the test ends.
func startServer(t testing.TB, dataDir string, extraArgs ...string) *testServer {
	t.Helper()
	s := newTestServer(dataDir, extraArgs...)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *testServer) start() error {
	// Keep each data dir small; durability across kill -9 is tested
	// separately with fsync on.
	s.SetArgs(append([]string{"--embedded-etcd-quota-backend-bytes", fmt.Sprint(256 << 20)}, s.args...)...)
	return s.Server.Start(readyTimeout)
}

// Kill9 kills the server without warning, like a crash.
func (s *testServer) Kill9(t testing.TB) {
	t.Helper()
	s.Server.Kill9()
}

// Restart starts the server again on the same data dir.
func (s *testServer) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// RESTConfig is the admin config from the kubeconfig the server wrote.
func (s *testServer) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	config, err := s.Server.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return config
}

// Client is the generated clientset as admin.
func (s *testServer) Client(t testing.TB) *versioned.Clientset {
	t.Helper()
	client, err := versioned.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return client
}

// requireKubectl skips a test that drives kubectl when there is none on a
// developer's machine, and fails it in CI, where a missing kubectl must
// not pass for green.
func requireKubectl(t testing.TB) {
	t.Helper()
	if kubectlPath != "" {
		return
	}
	const msg = "no kubectl at /usr/bin/kubectl or on PATH; set KUBECTL to run the kubectl tests"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Kubectl runs kubectl against the server as admin.
func (s *testServer) Kubectl(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	requireKubectl(t)
	stdout, stderr, err := testenv.Kubectl(context.Background(), kubectlPath, s.kubectlFlags(), stdin, args...)
	if err != nil {
		return stdout + stderr, err
	}
	return stdout, nil
}

// kubectlFlags point kubectl at the server, with a discovery cache of its
// own: the shared one in ~/.kube/cache is keyed by host and port, and a
// port that another API server (e.g. a kube-apiserver serving
// resource.k8s.io) used before would resolve resource names to its groups.
func (s *testServer) kubectlFlags() []string {
	return []string{"--kubeconfig", s.Kubeconfig, "--cache-dir", filepath.Join(filepath.Dir(s.Kubeconfig), "kubectl-cache"), "--request-timeout=60s"}
}

// MustKubectl is Kubectl that fails the test on error.
func (s *testServer) MustKubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := s.Kubectl(t, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	sharedOnce    sync.Once
	shared        *testServer
	sharedErr     error
	sharedDataDir string
)

// sharedServer is one server for the tests that only add objects with
// names of their own; it saves a start (and a data dir) per test.
func sharedServer(t testing.TB) *testServer {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDataDir, sharedErr = os.MkdirTemp("", "draplane-e2e-shared")
		if sharedErr != nil {
			return
		}
		// The shared server checks what the API stores and serves; the
		// controllers would write to the same objects, so they are off
		// here and tested with servers of their own.
		shared = newTestServer(sharedDataDir, "--controllers=false")
		sharedErr = shared.start()
	})
	if sharedErr != nil {
		t.Fatalf("shared server: %v", sharedErr)
	}
	return shared
}

func sharedServerStop() {
	if shared != nil {
		shared.Stop()
	}
	if sharedDataDir != "" {
		os.RemoveAll(sharedDataDir)
	}
}
