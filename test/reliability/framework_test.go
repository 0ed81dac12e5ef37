// Package reliability kills, restarts and fails over the real dra-apiserver
// binary: crash safety with fsync on, HA on a 3-member etcd cluster, a
// randomized churn test with an independent double-allocation checker, and
// chaos over gangs, preemption and node agents with a real kubelet plugin
// (chaos_test.go; its invariants in chaoscheck_test.go).
//
// The tests take minutes, so they run only with DRAPLANE_RELIABILITY=1
// (`make test-reliability`, which CI runs); without it each says so and
// skips. Every random choice comes from a seeded RNG: the seed is logged
// and DRAPLANE_SEED reproduces a run.
package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
	"github.com/draplane/draplane/internal/testing/skipnote"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/launcher"
)

const (
	// readyTimeout is generous: the machine is shared and slow.
	readyTimeout = 3 * time.Minute
	enableEnv    = "DRAPLANE_RELIABILITY"
)

var (
	serverBinary string
	etcdBinary   string
	repoRoot     string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	repoRoot = testenv.RepoRoot()
	if os.Getenv(enableEnv) == "" {
		skipnote.Print("test/reliability", fmt.Sprintf("crash safety, HA, churn and chaos take minutes; run them with %s=1 (make test-reliability)", enableEnv))
		return m.Run() // every test skips, saying why
	}
	dir, err := os.MkdirTemp("", "draplane-reliability-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBinary = filepath.Join(dir, "dra-apiserver")
	etcdBinary = filepath.Join(dir, "etcdmember")
	for _, b := range []struct{ out, pkg string }{
		{serverBinary, "./cmd/dra-apiserver"},
		{etcdBinary, "./test/reliability/etcdmember"},
	} {
		if err := launcher.Build(b.pkg, b.out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

func requireEnabled(t *testing.T) {
	t.Helper()
	if os.Getenv(enableEnv) == "" {
		t.Skipf("reliability tests take minutes: run them with %s=1 (make test-reliability)", enableEnv)
	}
}

// seed is DRAPLANE_SEED or def; logged so that a failure can be replayed.
func seed(t *testing.T, def int64) int64 {
	t.Helper()
	s := def
	if env := os.Getenv("DRAPLANE_SEED"); env != "" {
		v, err := strconv.ParseInt(env, 10, 64)
		if err != nil {
			t.Fatalf("DRAPLANE_SEED: %v", err)
		}
		s = v
	}
	t.Logf("seed %d (DRAPLANE_SEED=%d reproduces this run)", s, s)
	return s
}

// process is one child process whose output is kept.
type process = launcher.Process

// server is one dra-apiserver process on a fixed port, so that clients
// keep their address across restarts.
type server struct {
	*launcher.Server
}

func newServer(t testing.TB, name, dataDir string, extraArgs ...string) *server {
	s := &server{launcher.NewServer(name, serverBinary, dataDir, testenv.MustFreePort(t), extraArgs...)}
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server and waits until /readyz answers 200.
func (s *server) Start() error { return s.Server.Start(readyTimeout) }

// RESTConfig is the admin config the server wrote, without client-side
// rate limits.
func (s *server) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	config, err := restConfig(s)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	return config
}

func (s *server) Client(t testing.TB) *versioned.Clientset {
	t.Helper()
	c, err := versioned.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *server) KubeClient(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func restConfig(s *server) (*rest.Config, error) {
	config, err := s.Server.RESTConfig()
	if err != nil {
		return nil, err
	}
	config.QPS, config.Burst = -1, 0
	config.Timeout = 30 * time.Second
	return config, nil
}

func newKube(s *server) (*kubernetes.Clientset, error) {
	config, err := restConfig(s)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(config)
}

func newResource(s *server) (resourcev1client.ResourceV1Interface, error) {
	config, err := restConfig(s)
	if err != nil {
		return nil, err
	}
	c, err := versioned.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return c.ResourceV1(), nil
}
