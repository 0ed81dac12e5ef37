package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
)

// loopbackCertValidity is how long the loopback certificate of one
// process is valid, as k8s.io/apiserver's.
const loopbackCertValidity = (3*365 + 1) * 24 * time.Hour

// ApplyLoopbackClient gives config the client the server uses to call
// itself: a bearer token of this process and a certificate made for this
// process that the server presents to it (selected by SNI), as
// k8s.io/apiserver's SecureServingOptionsWithLoopback does. Its
// certificate has an ECDSA P-256 key instead of two RSA 2048 ones (a CA
// and a leaf): generating those was a noticeable part of every start. The
// loopback-serving-certificate health check fails once it expires. A
// server that does not serve gets no loopback client.
func ApplyLoopbackClient(config *genericapiserver.Config) error {
	if config.SecureServing == nil {
		return nil
	}
	certPEM, keyPEM, expires, err := newLoopbackCert(time.Now())
	if err != nil {
		return fmt.Errorf("loopback client certificate: %w", err)
	}
	provider, err := dynamiccertificates.NewStaticSNICertKeyContent("self-signed loopback", certPEM, keyPEM, genericapiserver.LoopbackClientServerNameOverride)
	if err != nil {
		return fmt.Errorf("loopback client certificate: %w", err)
	}
	// First, so that it wins over any other certificate for the name.
	config.SecureServing.SNICerts = append([]dynamiccertificates.SNICertKeyContentProvider{provider}, config.SecureServing.SNICerts...)
	loopback, err := config.SecureServing.NewLoopbackClientConfig(uuid.NewString(), certPEM)
	if err != nil {
		config.SecureServing.SNICerts = config.SecureServing.SNICerts[1:]
		return fmt.Errorf("loopback client: %w", err)
	}
	config.LoopbackClientConfig = loopback
	check := healthz.NamedCheck("loopback-serving-certificate", func(*http.Request) error {
		if time.Now().After(expires) {
			return errors.New("loopback serving certificate is expired")
		}
		return nil
	})
	config.AddHealthzChecks(check)
	config.AddLivezChecks(check)
	return nil
}

// newLoopbackCert returns a self-signed certificate for the loopback
// server name, which is also the only CA its client trusts, and its key.
func newLoopbackCert(now time.Time) (certPEM, keyPEM []byte, expires time.Time, err error) {
	name := genericapiserver.LoopbackClientServerNameOverride
	expires = now.Add(loopbackCertValidity)
	der, key, err := selfSigned(&x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", name, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              expires,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{name},
	})
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	if keyPEM, err = ecKeyPEM(key); err != nil {
		return nil, nil, time.Time{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, expires, nil
}
