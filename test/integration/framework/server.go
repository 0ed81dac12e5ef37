// Package framework starts dra-apiserver inside a test process, for the
// integration tests of the controllers.
package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/draplane/draplane/cmd/dra-apiserver/app"
	"github.com/draplane/draplane/internal/server"
)

// StartServer runs dra-apiserver in this process on a free port, with its
// own data directory and etcd without fsync, until ctx ends (wg tracks
// it). The server's own controllers are off unless withControllers: a test
// that runs the controllers under test itself must not get a second set
// racing them. It returns an admin client config without client-side rate
// limit, once /readyz answers and namespace default exists.
func StartServer(ctx context.Context, tb testing.TB, wg *sync.WaitGroup, withControllers bool) *rest.Config {
	tb.Helper()
	return StartServerWithEtcd(ctx, tb, wg, withControllers, "")
}

// StartServerWithEtcd is StartServer with the objects stored in the etcd
// at etcdURL (see etcdtest.Start) instead of an embedded one, so that a
// test can read and write the stored bytes itself. An empty etcdURL means
// the embedded etcd.
func StartServerWithEtcd(ctx context.Context, tb testing.TB, wg *sync.WaitGroup, withControllers bool, etcdURL string) *rest.Config {
	tb.Helper()
	_, restConfig := StartServerWithConfig(ctx, tb, wg, withControllers, etcdURL)
	return restConfig
}

// StartServerWithConfig is StartServerWithEtcd that also returns the
// server's config, for a test of what runs inside the server's process.
func StartServerWithConfig(ctx context.Context, tb testing.TB, wg *sync.WaitGroup, withControllers bool, etcdURL string) (*server.Config, *rest.Config) {
	tb.Helper()
	config, srv := NewServer(ctx, tb, withControllers, etcdURL)
	kubeconfig := config.Extra.KubeconfigPath
	wg.Go(func() {
		if err := srv.Run(ctx); err != nil {
			tb.Errorf("server stopped: %v", err)
		}
	})

	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		tb.Fatalf("load admin kubeconfig: %v", err)
	}
	restConfig.QPS = -1
	kube := kubernetes.NewForConfigOrDie(restConfig)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return false, nil
		}
		_, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		tb.Fatalf("server not ready with namespace default: %v", err)
	}
	return config, restConfig
}

// NewServer builds dra-apiserver as StartServerWithEtcd does, without
// running it: Server.Run, or else config.Close, releases its etcd and
// data directory.
func NewServer(ctx context.Context, tb testing.TB, withControllers bool, etcdURL string) (*server.Config, *server.Server) {
	tb.Helper()
	options := app.NewOptions()
	if etcdURL != "" {
		options.Etcd.StorageConfig.Transport.ServerList = []string{etcdURL}
	}
	options.DataDir = tb.TempDir()
	options.SecureServing.BindPort = 0
	options.EmbeddedEtcd.UnsafeNoFsync = true
	options.Controllers.Run = withControllers
	if err := options.Complete(); err != nil {
		tb.Fatalf("complete options: %v", err)
	}
	if err := options.Validate(); err != nil {
		tb.Fatalf("validate options: %v", err)
	}
	config, err := options.Config(ctx)
	if err != nil {
		tb.Fatalf("server config: %v", err)
	}
	srv, err := config.Complete().New()
	if err != nil {
		config.Close()
		tb.Fatalf("build server: %v", err)
	}
	return config, srv
}
