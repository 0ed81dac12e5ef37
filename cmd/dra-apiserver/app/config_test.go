package app

import (
	"crypto/ecdsa"
	"crypto/tls"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/draplane/draplane/internal/server"
	"github.com/draplane/draplane/internal/server/etcdstorage"
)

// TestConfigFailureReleasesEverything: a failure after the embedded etcd
// started returns (instead of waiting for etcd twice), stops etcd and
// frees the data dir for the next attempt.
func TestConfigFailureReleasesEverything(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dataDir := t.TempDir()
	o := NewOptions()
	o.DataDir = dataDir
	o.SecureServing.BindPort = 0
	o.EmbeddedEtcd.UnsafeNoFsync = true
	// Read only once storage is configured, after etcd is up.
	o.Etcd.EncryptionProviderConfigFilepath = filepath.Join(dataDir, "missing-encryption-config.yaml")
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	_, err := o.Config(ctx)
	if err == nil || !strings.Contains(err.Error(), "etcd storage") {
		t.Fatalf("Config: got %v, want an etcd storage error", err)
	}
	lock, err := etcdstorage.LockDataDir(dataDir)
	if err != nil {
		t.Fatalf("data dir still locked after a failed Config: %v", err)
	}
	lock.Unlock()
}

// TestLoopbackClient: the server's client of itself trusts the certificate
// the server presents for the loopback name, over a real TLS handshake;
// its key is ECDSA (RSA keys took a tenth of a second or more of every
// start to generate), and the loopback-serving-certificate check watches
// its expiry.
func TestLoopbackClient(t *testing.T) {
	o := NewOptions()
	o.DataDir = t.TempDir()
	o.SecureServing.BindPort = 0
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	_, codecs, err := server.NewScheme(true)
	if err != nil {
		t.Fatal(err)
	}
	generic, err := server.NewRecommendedConfig(codecs)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.applyServing(t.Context(), generic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { generic.SecureServing.Listener.Close() })
	loopback := generic.LoopbackClientConfig
	if loopback == nil || loopback.BearerToken == "" || loopback.TLSClientConfig.ServerName != genericapiserver.LoopbackClientServerNameOverride {
		t.Fatalf("loopback client config %+v, want a token and server name %s", loopback, genericapiserver.LoopbackClientServerNameOverride)
	}
	if len(generic.SecureServing.SNICerts) == 0 || generic.SecureServing.SNICerts[0].Name() != "self-signed loopback" {
		t.Fatalf("SNI certificates %v, want the loopback one first", generic.SecureServing.SNICerts)
	}
	certPEM, keyPEM := generic.SecureServing.SNICerts[0].CurrentCertKeyContent()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Errorf("loopback key is a %T, want *ecdsa.PrivateKey", pair.PrivateKey)
	}

	clientTLS, err := rest.TLSConfigFor(loopback)
	if err != nil {
		t.Fatal(err)
	}
	serverConn, clientConn := net.Pipe()
	defer serverConn.Close()
	defer clientConn.Close()
	serverDone := make(chan error, 1)
	go func() {
		serverDone <- tls.Server(serverConn, &tls.Config{Certificates: []tls.Certificate{pair}}).Handshake()
	}()
	if err := tls.Client(clientConn, clientTLS).Handshake(); err != nil {
		t.Errorf("loopback client handshake: %v", err)
	}
	clientConn.Close()
	<-serverDone

	for kind, checks := range map[string][]healthz.HealthChecker{"healthz": generic.HealthzChecks, "livez": generic.LivezChecks} {
		if !slices.ContainsFunc(checks, func(c healthz.HealthChecker) bool { return c.Name() == "loopback-serving-certificate" }) {
			t.Errorf("%s lacks the loopback-serving-certificate check", kind)
		}
	}
}
