// Package reliability kills, restarts and fails over the real dra-apiserver
// binary: crash safety with fsync on, HA on a 3-member etcd cluster, and a
// randomized churn test with an independent double-allocation checker.
//
// The tests take minutes, so they run only with DRAPLANE_RELIABILITY=1
// (`make test-reliability`, which CI runs); without it each says so and
// skips. Every random choice comes from a seeded RNG: the seed is logged
// and DRAPLANE_SEED reproduces a run.
package reliability

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
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
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	if os.Getenv(enableEnv) == "" {
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
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		build.Dir = repoRoot
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", b.pkg, ":", err)
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

// freePort asks the kernel for a free loopback port.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is one child process whose output is kept.
type process struct {
	name   string
	binary string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}

	mu     sync.Mutex
	output bytes.Buffer
	// lines is called for every stdout/stderr line (under mu).
	lines func(string)
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.Write(b)
}

func (p *process) startProcess() error {
	p.cmd = exec.Command(p.binary, p.args...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.cmd.Stderr = p
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.binary, err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 64<<10), 1<<20)
		for scanner.Scan() {
			line := scanner.Text()
			p.mu.Lock()
			p.output.WriteString(line + "\n")
			if p.lines != nil {
				p.lines(line)
			}
			p.mu.Unlock()
		}
	}()
	exited := p.exited
	cmd := p.cmd
	go func() {
		<-scanned
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

// Output is everything the process printed in its current run.
func (p *process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

func (p *process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill9 kills the process without warning, like a crash, and waits for it.
func (p *process) Kill9() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop terminates gracefully (SIGKILL after a minute).
func (p *process) Stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.Kill9()
	}
}

// server is one dra-apiserver process on a fixed port, so that clients
// keep their address across restarts.
type server struct {
	process
	dataDir string
	port    int
	URL     string
	// Starts counts the starts; Ready the time of the last start to /readyz.
	Starts int
	Ready  time.Duration
}

func newServer(t testing.TB, name, dataDir string, extraArgs ...string) *server {
	s := &server{dataDir: dataDir, port: freePort(t)}
	s.name = name
	s.binary = serverBinary
	s.args = append([]string{"--data-dir", dataDir, "--secure-port", strconv.Itoa(s.port), "--bind-address", "127.0.0.1"}, extraArgs...)
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", s.port)
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server and waits until /readyz answers 200.
func (s *server) Start() error {
	s.mu.Lock()
	s.output.Reset()
	s.mu.Unlock()
	begin := time.Now()
	if err := s.startProcess(); err != nil {
		return err
	}
	s.Starts++
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var client *http.Client
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !s.running() {
			return false, fmt.Errorf("%s exited", s.name)
		}
		if client == nil {
			c, err := s.anonymousHTTPClient()
			if err != nil {
				return false, nil // the CA is written at first start
			}
			client = c
		}
		resp, err := client.Get(s.URL + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		s.Kill9()
		return fmt.Errorf("%s not ready within %v: %v\n%s", s.name, readyTimeout, err, tail(s.Output(), 40))
	}
	s.Ready = time.Since(begin)
	return nil
}

func (s *server) anonymousHTTPClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(filepath.Join(s.dataDir, "pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in CA file")
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}, nil
}

// RESTConfig is the admin config the server wrote, without client-side
// rate limits.
func (s *server) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	config.QPS, config.Burst = -1, 0
	config.Timeout = 30 * time.Second
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

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func restConfig(s *server) (*rest.Config, error) {
	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.dataDir, "admin.kubeconfig"))
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

// StartAndKill starts the server and kills it with SIGKILL after the given
// time, typically before it is ready: recovery must survive a crash in the
// middle of recovery. It fails if the server exited by itself.
func (s *server) StartAndKill(after time.Duration) error {
	s.mu.Lock()
	s.output.Reset()
	s.mu.Unlock()
	if err := s.startProcess(); err != nil {
		return err
	}
	s.Starts++
	time.Sleep(after)
	if !s.running() {
		return fmt.Errorf("%s exited by itself during startup:\n%s", s.name, tail(s.Output(), 40))
	}
	s.Kill9()
	return nil
}
