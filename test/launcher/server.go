package launcher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// servingPrefix starts the line in which dra-apiserver says where it
// serves.
const servingPrefix = "draplane: serving on "

// Server is one dra-apiserver process on a data dir of its own.
type Server struct {
	Process
	// DataDir holds its etcd, CA and admin kubeconfig.
	DataDir string
	// Port is its secure port; 0 lets the server pick a free one on every
	// start, read from what it prints.
	Port int
	// URL is where the server serves; known before the start with a Port.
	URL string
	// Kubeconfig is the admin kubeconfig it writes.
	Kubeconfig string
	// Starts counts the starts; Ready is how long the last one took from
	// exec to /readyz answering 200.
	Starts int
	Ready  time.Duration
	// PollInterval is how often readiness is polled (50ms when zero).
	PollInterval time.Duration
}

// NewServer describes a dra-apiserver on dataDir; args come after
// --data-dir, --secure-port and (with a port) --bind-address. Nothing runs
// before Start.
func NewServer(name, binary, dataDir string, port int, args ...string) *Server {
	s := &Server{DataDir: dataDir, Port: port, Kubeconfig: filepath.Join(dataDir, "admin.kubeconfig")}
	s.Name, s.Binary = name, binary
	if port != 0 {
		s.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	}
	s.SetArgs(args...)
	return s
}

// SetArgs replaces the flags that follow the data dir and port flags; the
// next start uses them.
func (s *Server) SetArgs(args ...string) {
	s.Args = []string{"--data-dir", s.DataDir, "--secure-port", strconv.Itoa(s.Port)}
	if s.Port != 0 {
		s.Args = append(s.Args, "--bind-address", "127.0.0.1")
	}
	s.Args = append(s.Args, args...)
}

// Start starts the server and waits, at most timeout, until /readyz
// answers 200. A server that does not get ready is killed.
func (s *Server) Start(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	urls := make(chan string, 1)
	s.mu.Lock()
	s.onLine = func(line string) {
		if url, ok := strings.CutPrefix(line, servingPrefix); ok {
			select {
			case urls <- url:
			default:
			}
		}
	}
	s.mu.Unlock()
	begin := time.Now()
	if err := s.Process.Start(); err != nil {
		return err
	}
	s.Starts++
	if s.Port == 0 {
		select {
		case s.URL = <-urls:
		case <-s.exited:
			return fmt.Errorf("%s exited before serving:\n%s", s.Name, Tail(s.Output(), 40))
		case <-ctx.Done():
			s.Kill9()
			return fmt.Errorf("%s did not print its URL within %v:\n%s", s.Name, timeout, Tail(s.Output(), 40))
		}
	}
	if err := s.waitReady(ctx); err != nil {
		s.Kill9()
		return fmt.Errorf("%s not ready within %v: %v\n%s", s.Name, timeout, err, Tail(s.Output(), 40))
	}
	s.Ready = time.Since(begin)
	return nil
}

// waitReady polls /readyz until it answers 200, the process exits or ctx
// ends.
func (s *Server) waitReady(ctx context.Context) error {
	interval := s.PollInterval
	if interval == 0 {
		interval = 50 * time.Millisecond
	}
	var client *http.Client
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		if !s.Running() {
			return false, fmt.Errorf("%s exited", s.Name)
		}
		if client == nil {
			c, err := s.AnonymousHTTPClient()
			if err != nil {
				return false, nil // the CA is written at the first start
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
}

// StartAndKill starts the server and kills it with SIGKILL after the given
// time, typically before it is ready. It fails if the server exited by
// itself meanwhile.
func (s *Server) StartAndKill(after time.Duration) error {
	if err := s.Process.Start(); err != nil {
		return err
	}
	s.Starts++
	time.Sleep(after)
	if !s.Running() {
		return fmt.Errorf("%s exited by itself during startup:\n%s", s.Name, Tail(s.Output(), 40))
	}
	s.Kill9()
	return nil
}

// CAFile is the CA of the server's data dir.
func (s *Server) CAFile() string { return filepath.Join(s.DataDir, "pki", "ca.crt") }

// AnonymousHTTPClient trusts the server's CA but presents no certificate.
func (s *Server) AnonymousHTTPClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(s.CAFile())
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

// RESTConfig is the admin config from the kubeconfig the server wrote.
func (s *Server) RESTConfig() (*rest.Config, error) {
	config, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", s.Kubeconfig, err)
	}
	return config, nil
}
