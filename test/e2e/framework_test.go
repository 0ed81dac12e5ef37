// Package e2e drives the real dra-apiserver binary with /usr/bin/kubectl and
// the generated clientset. TestMain builds the binary once; each server
// runs on its own temp data dir and a free port.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/draplane/draplane/generated/clientset/versioned"
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
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
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
	dir, err := os.MkdirTemp("", "draplane-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBinary = filepath.Join(dir, "dra-apiserver")
	ldflags := strings.Join([]string{
		"-X k8s.io/component-base/version.gitVersion=" + e2eVersion,
		"-X k8s.io/component-base/version.gitMajor=0",
		"-X k8s.io/component-base/version.gitMinor=1",
		"-X k8s.io/component-base/version.gitTreeState=clean",
	}, " ")
	build := exec.Command("go", "build", "-ldflags", ldflags, "-o", serverBinary, "./cmd/dra-apiserver")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build dra-apiserver:", err)
		return 1
	}
	code := m.Run()
	sharedServerStop()
	return code
}

// testServer is one running dra-apiserver process.
type testServer struct {
	dataDir string
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{}
	// URL is where the server said it serves.
	URL string
	// Kubeconfig is the admin kubeconfig it wrote.
	Kubeconfig string
	// Ready is how long it took from exec to /readyz answering 200.
	Ready time.Duration

	mu     sync.Mutex
	output bytes.Buffer
}

// startServer starts dra-apiserver on dataDir with a free port and waits
// until /readyz answers 200. The process is killed when the test ends.
func startServer(t testing.TB, dataDir string, extraArgs ...string) *testServer {
	t.Helper()
	s := &testServer{dataDir: dataDir, args: extraArgs}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *testServer) start() error {
	args := append([]string{"--data-dir", s.dataDir, "--secure-port", "0",
		// Keep each data dir small; durability across kill -9 is
		// tested separately with fsync on.
		"--embedded-etcd-quota-backend-bytes", fmt.Sprint(256 << 20),
	}, s.args...)
	s.cmd = exec.Command(serverBinary, args...)
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.cmd.Stderr = &lockedWriter{s}
	s.exited = make(chan struct{})
	urls := make(chan string, 1)
	begin := time.Now()
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", serverBinary, err)
	}
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			s.mu.Lock()
			s.output.WriteString(line + "\n")
			s.mu.Unlock()
			if url, ok := strings.CutPrefix(line, "draplane: serving on "); ok {
				select {
				case urls <- url:
				default:
				}
			}
		}
	}()
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()

	select {
	case s.URL = <-urls:
	case <-s.exited:
		return fmt.Errorf("dra-apiserver exited before serving:\n%s", s.Output())
	case <-time.After(readyTimeout):
		s.Stop()
		return fmt.Errorf("dra-apiserver did not print its URL within %v:\n%s", readyTimeout, s.Output())
	}
	s.Kubeconfig = filepath.Join(s.dataDir, "admin.kubeconfig")
	client, err := s.anonymousHTTPClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.exited:
			return false, fmt.Errorf("dra-apiserver exited")
		default:
		}
		resp, err := client.Get(s.URL + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		s.Stop()
		return fmt.Errorf("dra-apiserver not ready: %v\n%s", err, s.Output())
	}
	s.Ready = time.Since(begin)
	return nil
}

// Output is everything the server printed.
func (s *testServer) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// Stop terminates the server gracefully and waits for it.
func (s *testServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Kill9 kills the server without warning, like a crash.
func (s *testServer) Kill9(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-s.exited
}

// Restart starts the server again on the same data dir.
func (s *testServer) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	s.output.Reset()
	s.mu.Unlock()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// RESTConfig is the admin config from the kubeconfig the server wrote.
func (s *testServer) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", s.Kubeconfig, err)
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

// anonymousHTTPClient trusts the server's CA but presents no certificate.
func (s *testServer) anonymousHTTPClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(filepath.Join(s.dataDir, "pki", "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in CA file")
	}
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}, nil
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
	cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", s.Kubeconfig, "--request-timeout=60s"}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("kubectl %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
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

type lockedWriter struct{ s *testServer }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.output.Write(p)
}

var _ io.Writer = &lockedWriter{}

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
		shared = &testServer{dataDir: sharedDataDir, args: []string{"--controllers=false"}}
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
