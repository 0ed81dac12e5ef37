package e2e

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// authResource is one resource the server serves, with a valid object the
// admin can create.
type authResource struct {
	resource string
	// prefix is the collection URL without a namespace.
	prefix     string
	namespaced bool
	// object returns a valid JSON object named name.
	object func(name string) string
	// subresources that must be refused as well (get and update).
	subresources []string
}

func authResources() []authResource {
	const group = "/apis/resource.draplane.dev/v1"
	obj := func(apiVersion, kind, rest string) func(string) string {
		return func(name string) string {
			return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","metadata":{"name":"` + name + `"}` + rest + `}`
		}
	}
	const rv1 = "resource.draplane.dev/v1"
	return []authResource{
		{resource: "deviceclasses", prefix: group, object: obj(rv1, "DeviceClass", `,"spec":{}`)},
		{resource: "resourceslices", prefix: group, object: obj(rv1, "ResourceSlice",
			`,"spec":{"driver":"auth.example.com","nodeName":"auth-node","pool":{"name":"auth-pool","generation":1,"resourceSliceCount":1},"devices":[{"name":"d0"}]}`)},
		{resource: "resourceclaims", prefix: group, namespaced: true, object: obj(rv1, "ResourceClaim",
			`,"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"auth.example.com"}}]}}`), subresources: []string{"status"}},
		{resource: "resourceclaimtemplates", prefix: group, namespaced: true, object: obj(rv1, "ResourceClaimTemplate",
			`,"spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"auth.example.com"}}]}}}`)},
		{resource: "devicetaintrules", prefix: group, object: obj(rv1, "DeviceTaintRule",
			`,"spec":{"deviceSelector":{"driver":"auth.example.com"},"taint":{"key":"example.com/auth","effect":"NoSchedule"}}`), subresources: []string{"status"}},
		{resource: "namespaces", prefix: "/api/v1", object: obj("v1", "Namespace", ``)},
		{resource: "nodes", prefix: "/api/v1", object: obj("v1", "Node", ``)},
		{resource: "pods", prefix: "/api/v1", namespaced: true, object: obj("v1", "Pod",
			`,"spec":{"containers":[{"name":"c","image":"registry.example.com/app:1"}]}`), subresources: []string{"status"}},
		{resource: "events", prefix: "/api/v1", namespaced: true, object: obj("v1", "Event",
			`,"involvedObject":{"kind":"Pod","name":"auth-pod","namespace":"default","apiVersion":"v1"},"reason":"Testing","message":"auth matrix","type":"Normal","source":{"component":"authmatrix"},"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:00Z","count":1`)},
		{resource: "leases", prefix: "/apis/coordination.k8s.io/v1", namespaced: true, object: obj("coordination.k8s.io/v1", "Lease",
			`,"spec":{"holderIdentity":"auth","leaseDurationSeconds":15}`)},
	}
}

func (r authResource) collection() string {
	if r.namespaced {
		return r.prefix + "/namespaces/default/" + r.resource
	}
	return r.prefix + "/" + r.resource
}

// TestAuthMatrix: for every resource served and every verb, anonymous
// requests and a client certificate from another CA (claiming the admin
// group) are refused with 401 or 403, a user with a certificate from the
// server's CA outside the admin group with 403, and none of them changes
// anything; the admin succeeds.
func TestAuthMatrix(t *testing.T) {
	s := sharedServer(t)
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	// The existing helper's certificate is withheld by Go's TLS client
	// (the server's acceptable-CA list does not cover it); this one is
	// always presented, so the server itself must reject it.
	presented := foreignCertClient(t, s)
	withheld := strangerHTTPClient(t, s)
	// Signed by the server's own CA, so authenticated, but not an admin:
	// authorization must refuse it (403).
	developer := ownCACertClient(t, s, "developer", "developers")
	refusers := []struct {
		name   string
		client *http.Client
		codes  []int
	}{
		{"anonymous", anonymous, []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"foreign CA, presented", presented, []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"foreign CA, withheld", withheld, []int{http.StatusUnauthorized, http.StatusForbidden}},
		{"own CA, not admin", developer, []int{http.StatusForbidden}},
	}

	do := func(t *testing.T, client *http.Client, method, path, contentType, body string) (int, string) {
		t.Helper()
		return httpDo(t, s, client, method, path, contentType, body)
	}

	checked := 0
	for _, r := range authResources() {
		t.Run(r.resource, func(t *testing.T) {
			name := "authmatrix-" + strings.TrimSuffix(r.resource, "s")
			// The admin creates the object the others then try to read,
			// change and delete.
			if code, answer := do(t, admin, "POST", r.collection(), "application/json", r.object(name)); code != http.StatusCreated {
				t.Fatalf("admin create: status %d: %s", code, answer)
			}
			item := r.collection() + "/" + name
			adminGet := func() string {
				code, answer := do(t, admin, "GET", item, "", "")
				if code != http.StatusOK {
					t.Fatalf("admin get: status %d: %s", code, answer)
				}
				return answer
			}
			before := adminGet()

			type request struct {
				verb, method, path, contentType, body string
			}
			requests := []request{
				{"get", "GET", item, "", ""},
				{"list", "GET", r.collection(), "", ""},
				{"list all namespaces", "GET", r.prefix + "/" + r.resource, "", ""},
				{"watch", "GET", r.collection() + "?watch=true&timeoutSeconds=1", "", ""},
				{"create", "POST", r.collection(), "application/json", r.object(name + "-intruder")},
				{"update", "PUT", item, "application/json", r.object(name)},
				{"patch", "PATCH", item, "application/merge-patch+json", `{"metadata":{"labels":{"intruder":"yes"}}}`},
				{"apply", "PATCH", item + "?fieldManager=intruder", "application/apply-patch+yaml", r.object(name)},
				{"delete", "DELETE", item, "", ""},
				{"deletecollection", "DELETE", r.collection(), "", ""},
			}
			for _, sub := range r.subresources {
				requests = append(requests,
					request{"get " + sub, "GET", item + "/" + sub, "", ""},
					request{"update " + sub, "PUT", item + "/" + sub, "application/json", r.object(name)},
					request{"patch " + sub, "PATCH", item + "/" + sub, "application/merge-patch+json", `{"metadata":{"labels":{"intruder":"yes"}}}`},
				)
			}
			if r.resource == "pods" {
				requests = append(requests,
					request{"create binding", "POST", item + "/binding", "application/json",
						`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"` + name + `"},"target":{"kind":"Node","name":"auth-node"}}`},
					request{"create eviction", "POST", item + "/eviction", "application/json",
						`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"` + name + `","namespace":"default"}}`},
				)
			}
			for _, who := range refusers {
				for _, req := range requests {
					code, answer := do(t, who.client, req.method, req.path, req.contentType, req.body)
					checked++
					if !slices.Contains(who.codes, code) {
						t.Errorf("%s %s (%s %s): status %d, want one of %v: %.500s", who.name, req.verb, req.method, req.path, code, who.codes, answer)
					}
					if !strings.Contains(answer, `"kind":"Status"`) || strings.Contains(answer, `"items"`) || strings.Contains(answer, `"spec"`) {
						t.Errorf("%s %s: refused, but the answer carries data: %.500s", who.name, req.verb, answer)
					}
				}
			}
			if after := adminGet(); after != before {
				t.Errorf("refused requests changed the object:\nbefore: %s\nafter:  %s", before, after)
			}
			if code, _ := do(t, admin, "GET", r.collection()+"/"+name+"-intruder", "", ""); code != http.StatusNotFound {
				t.Errorf("refused create: GET %s-intruder: status %d, want 404", name, code)
			}

			// The admin may do all of it.
			for _, req := range []request{
				{"get", "GET", item, "", ""},
				{"list", "GET", r.collection(), "", ""},
				{"patch", "PATCH", item, "application/merge-patch+json", `{"metadata":{"labels":{"admin":"yes"}}}`},
				{"delete", "DELETE", item, "", ""},
			} {
				code, answer := do(t, admin, req.method, req.path, req.contentType, req.body)
				checked++
				if code != http.StatusOK && code != http.StatusAccepted {
					t.Errorf("admin %s: status %d: %.500s", req.verb, code, answer)
				}
			}
		})
	}
	t.Logf("auth matrix: %d requests checked", checked)
}

// foreignCertClient presents a client certificate for the admin group,
// signed by a CA the server does not know, on every handshake.
func foreignCertClient(t *testing.T, s *testServer) *http.Client {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "foreign-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := &tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
	client, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	client.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return cert, nil
	}
	return client
}

// ownCACertClient presents a client certificate for user (in group) signed
// by the server's own CA: it authenticates, but is not an admin.
func ownCACertClient(t *testing.T, s *testServer, user, group string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(s.dataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(s.dataDir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caBlock, _ := pem.Decode(caPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if caBlock == nil || keyBlock == nil {
		t.Fatal("server CA: no PEM")
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var caKey crypto.Signer
	if k, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes); err == nil {
		caKey, _ = k.(crypto.Signer)
	} else if k, err := x509.ParseECPrivateKey(keyBlock.Bytes); err == nil {
		caKey = k
	} else if k, err := x509.ParsePKCS1PrivateKey(keyBlock.Bytes); err == nil {
		caKey = k
	}
	if caKey == nil {
		t.Fatal("server CA key: unknown format")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: []string{group}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, key.Public(), caKey)
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
