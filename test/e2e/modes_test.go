package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

// TestExternalEtcd: with --etcd-servers nothing is embedded and the
// objects land in the given etcd, where a second server finds them.
func TestExternalEtcd(t *testing.T) {
	etcdURL := etcdtest.Start(t)
	first := startServer(t, t.TempDir(), "--etcd-servers", etcdURL)
	if _, err := os.Stat(filepath.Join(first.dataDir, "etcd")); !os.IsNotExist(err) {
		t.Errorf("an etcd data dir exists with --etcd-servers: %v", err)
	}
	ctx := context.Background()
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "external-class"}}
	if _, err := first.Client(t).ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first.Stop()

	// Another data dir (another CA), same etcd: the object is there.
	second := startServer(t, t.TempDir(), "--etcd-servers", etcdURL)
	if _, err := second.Client(t).ResourceV1().DeviceClasses().Get(ctx, "external-class", metav1.GetOptions{}); err != nil {
		t.Errorf("class through a second server on the same etcd: %v", err)
	}
}

// TestWithoutCoreLite: --core-lite=false serves only resource.draplane.dev,
// as in aggregated mode where the cluster owns pods and namespaces.
func TestWithoutCoreLite(t *testing.T) {
	s := startServer(t, t.TempDir(), "--core-lite=false")
	out := s.MustKubectl(t, "", "api-resources", "-o", "name")
	if strings.Contains(out, "pods") || strings.Contains(out, "namespaces") {
		t.Errorf("core resources served with --core-lite=false:\n%s", out)
	}
	if !strings.Contains(out, "resourceclaims.resource.draplane.dev") {
		t.Errorf("resource.draplane.dev missing:\n%s", out)
	}
	// No namespace objects exist, so no lifecycle admission either.
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: loose-claim
  namespace: anywhere
spec:
  devices:
    requests:
    - name: req
      exactly: {deviceClassName: gpu.example.com}
`, "create", "-f", "-")
}
