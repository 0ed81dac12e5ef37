package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	testingclock "k8s.io/utils/clock/testing"
)

// countingAuth authenticates a request by the common name of its first
// client certificate, or fails with err, and counts its calls.
type countingAuth struct {
	calls int
	err   error
}

func (a *countingAuth) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	a.calls++
	if a.err != nil {
		return nil, false, a.err
	}
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: req.TLS.PeerCertificates[0].Subject.CommonName}}, true, nil
}

func testCert(t *testing.T, name string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	der, _, err := selfSigned(&x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notAfter.Add(-24 * time.Hour),
		NotAfter:     notAfter,
	})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func certRequest(header http.Header, certs ...*x509.Certificate) *http.Request {
	req := &http.Request{Header: http.Header{}}
	for k, v := range header {
		req.Header[k] = v
	}
	if certs != nil {
		req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	}
	return req
}

func TestCacheClientCertificates(t *testing.T) {
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	alice := testCert(t, "alice", start.Add(time.Hour))
	bob := testCert(t, "bob", start.Add(time.Hour))
	soon := testCert(t, "soon", start.Add(3*time.Second))
	// step is one request: wait first, then authenticate.
	type step struct {
		wait      time.Duration
		req       *http.Request
		err       error // the inner authenticator fails with it
		wantUser  string
		wantCalls int // inner calls so far
	}
	tests := map[string][]step{
		"one check per chain": {
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 1},
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 1},
			{req: certRequest(nil, bob), wantUser: "bob", wantCalls: 2},
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 2},
		},
		"checked again after the ttl": {
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 1},
			{wait: 9 * time.Second, req: certRequest(nil, alice), wantUser: "alice", wantCalls: 1},
			{wait: 2 * time.Second, req: certRequest(nil, alice), wantUser: "alice", wantCalls: 2},
		},
		"not past the certificate's expiry": {
			{req: certRequest(nil, soon), wantUser: "soon", wantCalls: 1},
			{wait: 2 * time.Second, req: certRequest(nil, soon), wantUser: "soon", wantCalls: 1},
			{wait: 2 * time.Second, req: certRequest(nil, soon), wantUser: "soon", wantCalls: 2},
		},
		"another chain is another entry": {
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 1},
			{req: certRequest(nil, alice, bob), wantUser: "alice", wantCalls: 2},
			{req: certRequest(nil, alice, bob), wantUser: "alice", wantCalls: 2},
		},
		"tokens are never cached": {
			{req: certRequest(http.Header{"Authorization": {"Bearer x"}}, alice), wantUser: "alice", wantCalls: 1},
			{req: certRequest(http.Header{"Authorization": {"Bearer x"}}, alice), wantUser: "alice", wantCalls: 2},
			{req: certRequest(http.Header{"Sec-Websocket-Protocol": {"base64url.bearer.authorization.k8s.io.eA"}}, alice), wantUser: "alice", wantCalls: 3},
		},
		"failures are not cached": {
			{req: certRequest(nil, alice), err: errors.New("unknown authority"), wantCalls: 1},
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 2},
			{req: certRequest(nil, alice), wantUser: "alice", wantCalls: 2},
		},
		"no certificate": {
			{req: certRequest(nil), wantCalls: 1},
			{req: certRequest(nil), wantCalls: 2},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			clock := testingclock.NewFakeClock(start)
			inner := &countingAuth{}
			auth := newCertCache(inner, ClientCertCacheTTL, clock)
			for i, s := range steps {
				clock.Step(s.wait)
				inner.err = s.err
				resp, ok, err := auth.AuthenticateRequest(s.req)
				if (err != nil) != (s.err != nil) {
					t.Fatalf("step %d: error %v, want %v", i, err, s.err)
				}
				got := ""
				if ok {
					got = resp.User.GetName()
				}
				if got != s.wantUser {
					t.Errorf("step %d: user %q, want %q", i, got, s.wantUser)
				}
				if inner.calls != s.wantCalls {
					t.Errorf("step %d: %d checks of the chain, want %d", i, inner.calls, s.wantCalls)
				}
			}
		})
	}
}
