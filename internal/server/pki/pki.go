// Package pki keeps the data dir's certificate authority and what it
// signs: the serving certificate, the admin kubeconfig, client
// kubeconfigs for nodes and drivers, the loopback client's certificate;
// in aggregated mode, a CA shared by the replicas through a Secret of the
// host and the injection of that CA into the host's APIServices. It also
// caches the authentication of client certificates.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

const (
	// AdminKubeconfigName is the kubeconfig written into the data dir.
	AdminKubeconfigName = "admin.kubeconfig"
	// AdminUser is the user name in the admin client certificate.
	AdminUser = "draplane-admin"
	// AdminGroup is the group of the admin client certificate. It is the
	// group Kubernetes treats as superuser, so the same kubeconfig works
	// against this server and, in aggregated mode, the allow-list defaults.
	AdminGroup = "system:masters"

	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: a leaf certificate closer than this to expiry is
	// replaced at start.
	renewBefore = 30 * 24 * time.Hour
)

// pki is the certificate authority of one data dir and the files it signed.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// CAFile is the CA that signs the serving and client certificates; it is
// also the client CA the server trusts.
func (p *pki) CAFile() string { return p.path("ca.crt") }

// loadOrCreatePKI loads the CA kept in dir, creating it on first use. The
// CA is never regenerated: kubeconfigs handed out earlier stay valid.
func loadOrCreatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	p := &pki{dir: dir}
	certPEM, certErr := os.ReadFile(p.path("ca.crt"))
	keyPEM, keyErr := os.ReadFile(p.path("ca.key"))
	switch {
	case certErr == nil && keyErr == nil:
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("load CA from %s: %w", dir, err)
		}
		p.caCert, p.caKey, p.caPEM = cert, key, certPEM
		return p, nil
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("load CA from %s: certificate: %v, key: %v", dir, certErr, keyErr)
	}

	now := time.Now()
	der, key, err := selfSigned(&x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("draplane-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	p.caCert, p.caKey = cert, key
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writePair(p.path("ca.crt"), p.path("ca.key"), p.caPEM, key); err != nil {
		return nil, fmt.Errorf("write CA: %w", err)
	}
	return p, nil
}

// ensureServingCert returns the serving certificate and key files for the
// given names, reusing the stored pair while it is signed by the CA, covers
// every name and is not close to expiry.
func (p *pki) ensureServingCert(dnsNames []string, ips []net.IP) (certFile, keyFile string, err error) {
	certFile, keyFile = p.path("serving.crt"), p.path("serving.key")
	if cert, ok := p.loadLeaf(certFile, keyFile); ok && coversAll(cert, dnsNames, ips) {
		return certFile, keyFile, nil
	}
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "dra-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}
	if err := p.signLeaf(template, certFile, keyFile); err != nil {
		return "", "", fmt.Errorf("serving certificate: %w", err)
	}
	return certFile, keyFile, nil
}

// ensureAdminCert returns the PEM of the admin client certificate and key.
func (p *pki) ensureAdminCert() (certPEM, keyPEM []byte, err error) {
	certFile, keyFile := p.path("admin.crt"), p.path("admin.key")
	if cert, ok := p.loadLeaf(certFile, keyFile); !ok ||
		cert.Subject.CommonName != AdminUser || !slices.Contains(cert.Subject.Organization, AdminGroup) {
		template := &x509.Certificate{
			Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := p.signLeaf(template, certFile, keyFile); err != nil {
			return nil, nil, fmt.Errorf("admin client certificate: %w", err)
		}
	}
	if certPEM, err = os.ReadFile(certFile); err != nil {
		return nil, nil, fmt.Errorf("read admin certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(keyFile); err != nil {
		return nil, nil, fmt.Errorf("read admin key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// loadLeaf returns the stored certificate if the pair parses, the CA signed
// it and it is not close to expiry.
func (p *pki) loadLeaf(certFile, keyFile string) (*x509.Certificate, bool) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, false
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, false
	}
	cert, _, err := parsePair(certPEM, keyPEM)
	if err != nil || cert.CheckSignatureFrom(p.caCert) != nil || time.Until(cert.NotAfter) < renewBefore {
		return nil, false
	}
	return cert, true
}

func (p *pki) signLeaf(template *x509.Certificate, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	now := time.Now()
	template.SerialNumber = serialNumber()
	template.NotBefore = now.Add(-time.Hour)
	template.NotAfter = now.Add(leafValidity)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	template.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, template, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return fmt.Errorf("sign certificate: %w", err)
	}
	return writePair(certFile, keyFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key)
}

func coversAll(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	for _, name := range dnsNames {
		if !slices.Contains(cert.DNSNames, name) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse certificate: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parse key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("key of type %T cannot sign", key)
	}
	return cert, signer, nil
}

// selfSigned makes a P-256 key and the certificate of template signed
// with it.
func selfSigned(template *x509.Certificate) (der []byte, key *ecdsa.PrivateKey, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err = x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// ecKeyPEM encodes a private key as PEM.
func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: der}), nil
}

func writePair(certFile, keyFile string, certPEM []byte, key *ecdsa.PrivateKey) error {
	keyPEM, err := ecKeyPEM(key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, certPEM, 0o644)
}

// writeFileAtomic replaces path in one rename so a crash never leaves half
// a certificate or kubeconfig behind.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("read random serial number: %v", err))
	}
	return n
}

// writeAdminKubeconfig writes a kubeconfig for the admin user. Only the
// server URL changes between starts (when the port does).
func writeAdminKubeconfig(path, serverURL string, caPEM, certPEM, keyPEM []byte) error {
	const name = "draplane"
	config := clientcmdapi.NewConfig()
	config.Clusters[name] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthorityData: caPEM}
	config.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: AdminUser, Namespace: "default"}
	config.CurrentContext = name
	data, err := clientcmd.Write(*config)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	return writeFileAtomic(path, data, 0o600)
}

// CAFile is the CA of a data dir: it signs the serving and client
// certificates, and standalone it is the client CA the server trusts.
func CAFile(dataDir string) string { return filepath.Join(pkiDir(dataDir), "ca.crt") }

// EnsureServingCert returns the serving certificate of a data dir, signed
// by its CA (created on first use) and valid for dnsNames and ips; an
// existing certificate is reused while it covers them.
func EnsureServingCert(dataDir string, dnsNames []string, ips []net.IP) (certFile, keyFile string, err error) {
	ca, err := loadOrCreatePKI(pkiDir(dataDir))
	if err != nil {
		return "", "", err
	}
	return ca.ensureServingCert(dnsNames, ips)
}

// WriteAdminKubeconfig writes the admin kubeconfig of a data dir for the
// server at serverURL and returns its path.
func WriteAdminKubeconfig(dataDir, serverURL string) (string, error) {
	ca, err := loadOrCreatePKI(pkiDir(dataDir))
	if err != nil {
		return "", err
	}
	certPEM, keyPEM, err := ca.ensureAdminCert()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, AdminKubeconfigName)
	if err := writeAdminKubeconfig(path, serverURL, ca.caPEM, certPEM, keyPEM); err != nil {
		return "", err
	}
	return path, nil
}

func pkiDir(dataDir string) string { return filepath.Join(dataDir, "pki") }
