package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const sharedNS, sharedName = "draplane-system", "draplane-ca"

// servingSignedBy reports whether the data dir's serving certificate was
// signed by the CA in caPEM.
func servingSignedBy(t *testing.T, dataDir string, caPEM []byte) bool {
	t.Helper()
	certFile, _, err := EnsureServingCert(dataDir, []string{"draplane.draplane-system.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	servingPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	block, _ := pem.Decode(servingPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "draplane.draplane-system.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

func readCA(t *testing.T, dataDir string) []byte {
	t.Helper()
	ca, err := os.ReadFile(CAFile(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Two replicas with data dirs of their own end up with one CA, the
// first's, and serving certificates it signed; so do later starts.
func TestSharedCAReplicas(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	shared := SharedCA{Client: client, Namespace: sharedNS, Name: sharedName, Timeout: time.Second}

	first, second := t.TempDir(), t.TempDir()
	// The second replica had started once without the Secret: a CA and
	// serving certificate of its own exist in its data dir.
	if _, _, err := EnsureServingCert(second, []string{"draplane.draplane-system.svc"}, nil); err != nil {
		t.Fatal(err)
	}
	ownCA := readCA(t, second)

	if err := shared.Sync(ctx, first); err != nil {
		t.Fatal(err)
	}
	secret, err := client.CoreV1().Secrets(sharedNS).Get(ctx, sharedName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the first replica stored no Secret: %v", err)
	}
	firstCA := readCA(t, first)
	if !bytes.Equal(secret.Data[SharedCACertKey], firstCA) {
		t.Fatalf("the Secret's CA is not the first replica's")
	}

	if err := shared.Sync(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got := readCA(t, second); !bytes.Equal(got, firstCA) {
		t.Fatalf("the second replica kept its own CA, want the shared one")
	}
	if !servingSignedBy(t, second, firstCA) {
		t.Errorf("the second replica's serving certificate is not signed by the shared CA")
	}
	if servingSignedBy(t, second, ownCA) {
		t.Errorf("the second replica's serving certificate is still signed by its old CA")
	}
	if !servingSignedBy(t, first, firstCA) {
		t.Errorf("the first replica's serving certificate is not signed by the shared CA")
	}

	// A restart changes nothing.
	if err := shared.Sync(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := readCA(t, first); !bytes.Equal(got, firstCA) {
		t.Errorf("a restart replaced the CA")
	}
}

// Two replicas starting together: the one whose create loses adopts the
// winner's CA.
func TestSharedCACreateRace(t *testing.T) {
	ctx := t.Context()
	winner := t.TempDir()
	if _, err := loadOrCreatePKI(pkiDir(winner)); err != nil {
		t.Fatal(err)
	}
	winnerCA := readCA(t, winner)
	winnerKey, err := os.ReadFile(filepath.Join(pkiDir(winner), "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	// The Get says there is none; by the Create, the winner has stored it.
	client.PrependReactor("create", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		stored := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: sharedName, Namespace: sharedNS},
			Data:       map[string][]byte{SharedCACertKey: winnerCA, SharedCAKeyKey: winnerKey},
		}
		if err := client.Tracker().Add(stored); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, sharedName)
	})
	loser := t.TempDir()
	if err := (SharedCA{Client: client, Namespace: sharedNS, Name: sharedName, Timeout: time.Second}).Sync(ctx, loser); err != nil {
		t.Fatal(err)
	}
	if got := readCA(t, loser); !bytes.Equal(got, winnerCA) {
		t.Errorf("the replica whose create lost kept its own CA")
	}
}

// A Secret that holds no usable CA is refused at once, naming the Secret
// and the key; the data dir keeps its CA.
func TestSharedCABadSecret(t *testing.T) {
	other := t.TempDir()
	if _, err := loadOrCreatePKI(pkiDir(other)); err != nil {
		t.Fatal(err)
	}
	otherKey, err := os.ReadFile(filepath.Join(pkiDir(other), "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	leafDir := t.TempDir()
	leafFile, leafKeyFile, err := EnsureServingCert(leafDir, []string{"x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := os.ReadFile(leafFile)
	leafKey, _ := os.ReadFile(leafKeyFile)
	validCA := readCA(t, other)

	tests := map[string]struct {
		data    map[string][]byte
		wantErr string
	}{
		"empty":               {data: nil, wantErr: "data ca.crt and ca.key must be a PEM certificate and its key"},
		"garbage certificate": {data: map[string][]byte{SharedCACertKey: []byte("x"), SharedCAKeyKey: otherKey}, wantErr: "must be a PEM certificate"},
		"another key":         {data: map[string][]byte{SharedCACertKey: validCA, SharedCAKeyKey: leafKey}, wantErr: "the key in ca.key is not the key of the certificate in ca.crt"},
		"not a CA":            {data: map[string][]byte{SharedCACertKey: leaf, SharedCAKeyKey: leafKey}, wantErr: "the certificate in ca.crt is not a CA"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sharedName, Namespace: sharedNS}, Data: tc.data})
			gets := 0
			client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return false, nil, nil
			})
			dataDir := t.TempDir()
			if _, err := loadOrCreatePKI(pkiDir(dataDir)); err != nil {
				t.Fatal(err)
			}
			before := readCA(t, dataDir)
			err := SharedCA{Client: client, Namespace: sharedNS, Name: sharedName, Timeout: 20 * time.Second}.Sync(t.Context(), dataDir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), sharedNS+"/"+sharedName) {
				t.Fatalf("error %v, want one naming %s/%s and %q", err, sharedNS, sharedName, tc.wantErr)
			}
			if gets != 1 {
				t.Errorf("%d Gets, want 1: a bad Secret is not retried", gets)
			}
			if !bytes.Equal(readCA(t, dataDir), before) {
				t.Errorf("the data dir's CA changed")
			}
		})
	}
}

// A refusal (403) is returned at once, not retried.
func TestSharedCAForbidden(t *testing.T) {
	client := fake.NewClientset()
	gets := 0
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, sharedName, nil)
	})
	err := SharedCA{Client: client, Namespace: sharedNS, Name: sharedName, Timeout: 20 * time.Second}.Sync(t.Context(), t.TempDir())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("error %v, want the 403", err)
	}
	if gets != 1 {
		t.Errorf("%d Gets, want 1: a 403 is not retried", gets)
	}
}
