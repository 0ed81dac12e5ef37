package pki

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// apiServices is the resource of the host's APIServices.
var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// CABundleFieldManager is the field manager of the caBundle patches.
const CABundleFieldManager = "dra-apiserver"

// CABundleConfig makes the server keep spec.caBundle of its own
// APIServices in the host cluster equal to the CA that signed its serving
// certificate, so that installing it takes no manual copy of the CA.
type CABundleConfig struct {
	// Host is the client config of the host cluster; it needs patch on
	// the APIServices (deploy/ grants it for exactly these names).
	Host *rest.Config
	// APIServices are the names to patch, such as
	// v1.resource.draplane.dev.
	APIServices []string
	// CAFile is the PEM bundle written into spec.caBundle. It is read
	// again on every pass, so a replaced CA reaches the APIServices.
	CAFile string
	// Resync is how often the bundle is written again once it was
	// written (a no-op patch when nothing changed); zero means 5 minutes.
	Resync time.Duration
	// RetryCap bounds the wait between failed attempts; zero means 30s.
	RetryCap time.Duration
}

// CABundleInjector patches the APIServices.
type CABundleInjector struct {
	config CABundleConfig
	client dynamic.NamespaceableResourceInterface
}

// NewCABundleInjector builds the injector; the server runs it from a
// post-start hook.
func NewCABundleInjector(config CABundleConfig) (*CABundleInjector, error) {
	if config.Resync == 0 {
		config.Resync = 5 * time.Minute
	}
	if config.RetryCap == 0 {
		config.RetryCap = 30 * time.Second
	}
	client, err := dynamic.NewForConfig(rest.CopyConfig(config.Host))
	if err != nil {
		return nil, fmt.Errorf("caBundle injection: client of the host cluster: %w", err)
	}
	return &CABundleInjector{config: config, client: client.Resource(apiServices)}, nil
}

// Run patches the APIServices until ctx ends: at once, again after
// failures (with a growing pause, capped at RetryCap), and every Resync.
func (i *CABundleInjector) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("cabundle")
	ctx = klog.NewContext(ctx, logger)
	var written []byte
	delay := 500 * time.Millisecond
	for {
		ca, err := i.inject(ctx)
		next := i.config.Resync
		if err != nil {
			logger.Error(err, "Could not write the serving CA into the APIServices; retrying (turn this off with --inject-ca-bundle=false when the caBundle is managed elsewhere)",
				"apiServices", i.config.APIServices, "retryIn", delay)
			next = delay
			delay = min(2*delay, i.config.RetryCap)
		} else {
			if !bytes.Equal(ca, written) {
				logger.Info("Wrote the serving CA into the APIServices' spec.caBundle", "apiServices", i.config.APIServices, "caFile", i.config.CAFile)
				written = ca
			}
			delay = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// inject writes the CA into every APIService once; it returns the CA
// written.
func (i *CABundleInjector) inject(ctx context.Context) ([]byte, error) {
	ca, err := os.ReadFile(i.config.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read the CA: %w", err)
	}
	if len(bytes.TrimSpace(ca)) == 0 {
		return nil, fmt.Errorf("read the CA: %s is empty", i.config.CAFile)
	}
	// caBundle is []byte: JSON carries it base64-encoded.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"caBundle": ca}})
	if err != nil {
		return nil, err
	}
	for _, name := range i.config.APIServices {
		_, err := i.client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: CABundleFieldManager})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("APIService %s does not exist (apply deploy/ first): %w", name, err)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("no permission to patch APIService %s (deploy/ grants patch on it to the server's ServiceAccount): %w", name, err)
		case err != nil:
			return nil, fmt.Errorf("patch APIService %s: %w", name, err)
		}
	}
	return ca, nil
}
