package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// TestAuthentication: health endpoints are open, everything else needs a
// client certificate signed by the server's CA and the admin group.
func TestAuthentication(t *testing.T) {
	s := sharedServer(t)
	anonymous, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	stranger := strangerHTTPClient(t, s)

	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		want   []int
	}{
		{"anonymous healthz", anonymous, "/healthz", []int{http.StatusOK}},
		{"anonymous livez", anonymous, "/livez", []int{http.StatusOK}},
		{"anonymous readyz", anonymous, "/readyz", []int{http.StatusOK}},
		{"anonymous readyz check", anonymous, "/readyz/etcd", []int{http.StatusOK}},
		{"anonymous list", anonymous, "/apis/resource.draplane.dev/v1/deviceclasses", []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"anonymous discovery", anonymous, "/apis", []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"anonymous openapi", anonymous, "/openapi/v2", []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"anonymous metrics", anonymous, "/metrics", []int{http.StatusUnauthorized, http.StatusForbidden}},
		// Go's TLS client withholds a certificate the server's CA list does
		// not cover, so this arrives as anonymous: 403 rather than 401.
		{"certificate from another CA", stranger, "/apis/resource.draplane.dev/v1/deviceclasses", []int{http.StatusUnauthorized, http.StatusForbidden}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.client.Get(s.URL + tc.path)
			if err != nil {
				t.Fatalf("GET %s: %v", tc.path, err)
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			ok := false
			for _, code := range tc.want {
				ok = ok || resp.StatusCode == code
			}
			if !ok {
				t.Errorf("GET %s: status %d, want one of %v; body: %s", tc.path, resp.StatusCode, tc.want, body.String())
			}
			if resp.StatusCode >= 400 && strings.Contains(body.String(), `"items"`) {
				t.Errorf("GET %s refused but returned data: %s", tc.path, body.String())
			}
		})
	}

	// The admin kubeconfig may read everything, /metrics included.
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/metrics", "/version", "/openapi/v3", "/apis/resource.draplane.dev/v1/deviceclasses"} {
		resp, err := admin.Get(s.URL + path)
		if err != nil {
			t.Fatalf("admin GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("admin GET %s: status %d, want 200", path, resp.StatusCode)
		}
	}
}

// strangerHTTPClient presents a client certificate in the admin group that
// the server's CA did not sign.
func strangerHTTPClient(t *testing.T, s *testServer) *http.Client {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "intruder", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	client, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	client.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}
	return client
}

// TestRestartKeepsData: kill -9, start again on the same data dir: the
// objects, the CA and the admin credentials are all still there.
func TestRestartKeepsData(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir)
	t.Logf("first start: ready %v after exec", s.Ready)
	client := s.Client(t)
	ctx := context.Background()

	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "durable-class"}}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: durable-claim
  namespace: default
spec:
  devices:
    requests:
    - name: req
      exactly:
        deviceClassName: durable-class
`, "create", "-f", "-")
	caBefore := readFile(t, filepath.Join(dataDir, "pki", "ca.crt"))
	adminBefore := readFile(t, filepath.Join(dataDir, "pki", "admin.crt"))

	s.Kill9(t)
	s.Restart(t)
	t.Logf("restart after kill -9: ready %v after exec", s.Ready)

	if got := readFile(t, filepath.Join(dataDir, "pki", "ca.crt")); !bytes.Equal(got, caBefore) {
		t.Error("the CA changed across a restart")
	}
	if got := readFile(t, filepath.Join(dataDir, "pki", "admin.crt")); !bytes.Equal(got, adminBefore) {
		t.Error("the admin client certificate changed across a restart")
	}
	client = s.Client(t)
	if _, err := client.ResourceV1().DeviceClasses().Get(ctx, "durable-class", metav1.GetOptions{}); err != nil {
		t.Errorf("class after restart: %v", err)
	}
	if _, err := client.ResourceV1().ResourceClaims("default").Get(ctx, "durable-claim", metav1.GetOptions{}); err != nil {
		t.Errorf("claim after restart: %v", err)
	}
	if out := s.MustKubectl(t, "", "get", "resourceclaims", "-n", "default", "-o", "name"); !strings.Contains(out, "durable-claim") {
		t.Errorf("kubectl after restart does not list the claim: %s", out)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestStandaloneStartup: the printed lines, the files in the data dir and
// the version the server reports.
func TestStandaloneStartup(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, dataDir)
	t.Logf("exec to /readyz 200: %v", s.Ready)
	out := s.Output()
	for _, want := range []string{
		"draplane: data directory " + dataDir,
		"export KUBECONFIG=" + filepath.Join(dataDir, "admin.kubeconfig"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, file := range []string{"admin.kubeconfig", "pki/ca.crt", "pki/ca.key", "pki/serving.crt", "pki/admin.crt", "etcd/member"} {
		if _, err := os.Stat(filepath.Join(dataDir, file)); err != nil {
			t.Errorf("data dir: %v", err)
		}
	}
	if info, err := os.Stat(filepath.Join(dataDir, "pki", "ca.key")); err == nil && info.Mode().Perm()&0o077 != 0 {
		t.Errorf("ca.key is readable by others: %v", info.Mode())
	}
	client, err := versioned.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// A Kubernetes version, that of the API level served, with ours
	// beside it as k3s does (v1.37.1+k3s1).
	if !strings.HasPrefix(info.GitVersion, "v1.") || !strings.HasSuffix(info.GitVersion, "+draplane."+e2eVersion) || info.Major != "1" {
		t.Errorf("server version %q (major %q), want v1.<minor>.<patch>+draplane.%s (major 1)", info.GitVersion, info.Major, e2eVersion)
	}
	if got := s.MustKubectl(t, "", "version", "-o", "json"); !strings.Contains(got, e2eVersion) {
		t.Errorf("kubectl version lacks %s:\n%s", e2eVersion, got)
	}
	// kubectl warns on its standard error when its minor and the server's
	// gitVersion are more than one apart: never because of our 0.x
	// release, only when this kubectl is really that far from the
	// Kubernetes version served.
	requireKubectl(t)
	versionOut, err := exec.Command(kubectlPath, append(s.kubectlFlags(), "version")...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, versionOut)
	}
	// The Kubernetes version implemented, as /version's major and minor
	// fields say.
	served, err := utilversion.ParseGeneric(info.Major + "." + info.Minor)
	if err != nil {
		t.Fatalf("server major %q minor %q: %v", info.Major, info.Minor, err)
	}
	var kubectlVersion *utilversion.Version
	for _, line := range strings.Split(string(versionOut), "\n") {
		if v, ok := strings.CutPrefix(line, "Client Version: "); ok {
			kubectlVersion, err = utilversion.ParseGeneric(v)
			if err != nil {
				t.Fatalf("kubectl client version %q: %v", v, err)
			}
		}
	}
	if kubectlVersion == nil {
		t.Fatalf("kubectl version printed no client version:\n%s", versionOut)
	}
	warned := strings.Contains(string(versionOut), "WARNING: version difference")
	skewed := kubectlVersion.Major() != served.Major() || max(kubectlVersion.Minor(), served.Minor())-min(kubectlVersion.Minor(), served.Minor()) > 1
	wantWarning := fmt.Sprintf("and server (%d.%d)", served.Major(), served.Minor())
	switch {
	case warned && !skewed, warned && !strings.Contains(string(versionOut), wantWarning):
		t.Errorf("kubectl %s warns of a skew against the server's %s:\n%s", kubectlVersion, info.GitVersion, versionOut)
	case skewed:
		t.Logf("kubectl %s is more than one minor from the served Kubernetes %d.%d: its warning is right:\n%s", kubectlVersion, served.Major(), served.Minor(), versionOut)
	}
}

// TestCommandLine: `version` and grouped `--help`.
func TestCommandLine(t *testing.T) {
	out, err := exec.Command(serverBinary, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), e2eVersion) {
		t.Errorf("dra-apiserver version: %v: %s", err, out)
	}
	out, err = exec.Command(serverBinary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v: %s", err, out)
	}
	for _, section := range []string{"Generic flags:", "Etcd flags:", "Secure serving flags:", "Authentication flags:", "Authorization flags:", "Logs flags:", "--data-dir", "--etcd-servers", "--secure-port"} {
		if !strings.Contains(string(out), section) {
			t.Errorf("--help lacks %q", section)
		}
	}
}

// TestRequestSizeLimit: bodies over 3 MiB are refused with 413 before they
// reach validation.
func TestRequestSizeLimit(t *testing.T) {
	s := sharedServer(t)
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"apiVersion":"resource.draplane.dev/v1","kind":"DeviceClass","metadata":{"name":"huge","annotations":{"filler":"` +
		strings.Repeat("x", 4<<20) + `"}},"spec":{}}`
	resp, err := admin.Post(s.URL+"/apis/resource.draplane.dev/v1/deviceclasses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("4 MiB body: status %d, want 413", resp.StatusCode)
	}
}

// TestDataDirInUse: a second server on a data dir in use fails at once with
// a message naming the holder, instead of blocking on etcd's files.
func TestDataDirInUse(t *testing.T) {
	dataDir := t.TempDir()
	startServer(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, serverBinary, "--data-dir", dataDir, "--secure-port", "0").CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("second server on the same data dir did not exit within %v", pollTimeout)
	}
	if err == nil || !strings.Contains(string(out), "is in use by another dra-apiserver") {
		t.Errorf("second server: %v\n%s", err, out)
	}
}

// TestCleanStartQuiet: `make run` on a fresh data directory (four
// simulated nodes) prints no error and no warning: nothing a user would
// have to act on, no stack trace. Real errors still show (TestDataDirInUse;
// package server's etcd tests for etcd's own errors).
func TestCleanStartQuiet(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=4")
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		out := s.Output()
		return strings.Contains(out, "Simulated nodes ready") && strings.Contains(out, "Became leader, starting controllers"), nil
	}); err != nil {
		t.Fatalf("the simulator or the controllers never started:\n%s", s.Output())
	}
	for _, line := range strings.Split(s.Output(), "\n") {
		// klog's E and W lines; zap's JSON lines of embedded etcd.
		if strings.HasPrefix(line, "E") || strings.HasPrefix(line, "W") || strings.HasPrefix(line, "F") ||
			strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"warn"`) || strings.Contains(line, "stacktrace") {
			t.Errorf("a clean start printed: %s", line)
		}
	}
}
