package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func parseCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestPKIIsKeptAcrossStarts: the CA is created once; leaf certificates are
// reused until a name is missing.
func TestPKIIsKeptAcrossStarts(t *testing.T) {
	dir := t.TempDir()
	first, err := loadOrCreatePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	localNames, localIPs := []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
	certFile, _, err := first.ensureServingCert(localNames, localIPs)
	if err != nil {
		t.Fatal(err)
	}
	servingBefore, _ := os.ReadFile(certFile)
	adminBefore, _, err := first.ensureAdminCert()
	if err != nil {
		t.Fatal(err)
	}

	second, err := loadOrCreatePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.caPEM, second.caPEM) {
		t.Error("the CA was regenerated")
	}
	if _, _, err := second.ensureServingCert(localNames, localIPs); err != nil {
		t.Fatal(err)
	}
	if servingAgain, _ := os.ReadFile(certFile); !bytes.Equal(servingBefore, servingAgain) {
		t.Error("the serving certificate was regenerated for the same names")
	}
	if adminAgain, _, _ := second.ensureAdminCert(); !bytes.Equal(adminBefore, adminAgain) {
		t.Error("the admin certificate was regenerated")
	}

	// A new bind address needs a new serving certificate.
	extra := net.ParseIP("10.1.2.3")
	if _, _, err := second.ensureServingCert(localNames, append(localIPs, extra)); err != nil {
		t.Fatal(err)
	}
	serving := parseCert(t, certFile)
	if !slices.ContainsFunc(serving.IPAddresses, extra.Equal) {
		t.Errorf("serving certificate lacks %s: %v", extra, serving.IPAddresses)
	}
	if err := serving.CheckSignatureFrom(second.caCert); err != nil {
		t.Errorf("serving certificate not signed by the CA: %v", err)
	}

	admin := parseCert(t, filepath.Join(dir, "admin.crt"))
	if admin.Subject.CommonName != AdminUser || !slices.Contains(admin.Subject.Organization, AdminGroup) {
		t.Errorf("admin subject %v", admin.Subject)
	}
	if !slices.Contains(admin.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("admin certificate is not for client auth: %v", admin.ExtKeyUsage)
	}
	for _, key := range []string{"ca.key", "serving.key", "admin.key"} {
		info, err := os.Stat(filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", key, info.Mode().Perm())
		}
	}
}

func TestAdminKubeconfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := loadOrCreatePKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.ensureAdminCert()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, AdminKubeconfigName)
	for _, url := range []string{"https://127.0.0.1:6444", "https://127.0.0.1:40000"} {
		if err := writeAdminKubeconfig(path, url, ca.caPEM, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		config, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		if config.Host != url {
			t.Errorf("server %q, want %q", config.Host, url)
		}
		if !bytes.Equal(config.CAData, ca.caPEM) || !bytes.Equal(config.CertData, certPEM) {
			t.Error("kubeconfig does not carry the CA and the admin certificate")
		}
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode: %v %v", info, err)
	}
}
