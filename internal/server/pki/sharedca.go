package pki

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Keys of the shared CA Secret.
const (
	SharedCACertKey = "ca.crt"
	SharedCAKeyKey  = "ca.key"
)

// SharedCA makes every replica of an aggregated deployment sign its
// serving certificate with one CA, kept in a Secret of the host cluster.
// Replicas with a CA each would write different caBundles into the same
// APIServices, each overwriting the others', and the aggregator would
// refuse every replica but the last writer.
type SharedCA struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Timeout bounds the retries of failures that may pass (the host not
	// reachable yet); zero means one minute. Refusals (403, an invalid
	// Secret) are returned at once.
	Timeout time.Duration
}

// Sync puts the shared CA into the data dir before the serving
// certificate is signed. The first replica stores its data dir's CA
// (created if there is none) in the Secret; every other replica, and every
// later start, adopts the Secret's CA, replacing its own. A serving
// certificate signed by a replaced CA is signed again by EnsureServingCert.
func (s SharedCA) Sync(ctx context.Context, dataDir string) error {
	logger := klog.FromContext(ctx)
	timeout := s.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		adopted, err := s.syncOnce(ctx, dataDir)
		switch {
		case err == nil:
			if adopted {
				logger.Info("Adopted the shared CA of the Secret", "secret", klog.KRef(s.Namespace, s.Name))
			} else {
				logger.Info("Stored the data dir's CA in the shared CA Secret", "secret", klog.KRef(s.Namespace, s.Name))
			}
			return true, nil
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err), errors.Is(err, errBadSharedCA):
			return false, err
		default:
			lastErr = err
			logger.V(2).Info("Shared CA not synced yet; retrying", "secret", klog.KRef(s.Namespace, s.Name), "err", err)
			return false, nil
		}
	})
	if err != nil && lastErr != nil && wait.Interrupted(err) {
		err = lastErr
	}
	if err != nil {
		return fmt.Errorf("shared CA in Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

var errBadSharedCA = errors.New("the Secret does not hold a CA")

// syncOnce makes one attempt; adopted says whether the Secret's CA was
// taken rather than stored.
func (s SharedCA) syncOnce(ctx context.Context, dataDir string) (adopted bool, err error) {
	secrets := s.Client.CoreV1().Secrets(s.Namespace)
	secret, err := secrets.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ca, err := loadOrCreatePKI(pkiDir(dataDir))
		if err != nil {
			return false, err
		}
		keyPEM, err := os.ReadFile(ca.path("ca.key"))
		if err != nil {
			return false, fmt.Errorf("read the CA key: %w", err)
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "draplane"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{SharedCACertKey: ca.caPEM, SharedCAKeyKey: keyPEM},
		}
		_, err = secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: CABundleFieldManager})
		if !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		// Another replica stored its CA first: take that one.
		if secret, err = secrets.Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
	} else if err != nil {
		return false, err
	}
	return true, adoptCA(dataDir, secret)
}

// adoptCA writes the Secret's CA into the data dir unless it is there
// already.
func adoptCA(dataDir string, secret *corev1.Secret) error {
	certPEM, keyPEM := secret.Data[SharedCACertKey], secret.Data[SharedCAKeyKey]
	cert, key, err := parsePair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%w: data %s and %s must be a PEM certificate and its key: %v", errBadSharedCA, SharedCACertKey, SharedCAKeyKey, err)
	}
	if public, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !public.Equal(key.Public()) {
		return fmt.Errorf("%w: the key in %s is not the key of the certificate in %s", errBadSharedCA, SharedCAKeyKey, SharedCACertKey)
	}
	if !cert.IsCA {
		return fmt.Errorf("%w: the certificate in %s is not a CA", errBadSharedCA, SharedCACertKey)
	}
	dir := pkiDir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	p := &pki{dir: dir}
	oldCert, certErr := os.ReadFile(p.path("ca.crt"))
	oldKey, keyErr := os.ReadFile(p.path("ca.key"))
	if certErr == nil && keyErr == nil && bytes.Equal(oldCert, certPEM) && bytes.Equal(oldKey, keyPEM) {
		return nil
	}
	// A crash between the two writes leaves a pair that differs from the
	// Secret's, which the next start writes again.
	if err := writeFileAtomic(p.path("ca.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(p.path("ca.crt"), certPEM, 0o644)
}
