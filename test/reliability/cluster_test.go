package reliability

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/testenv"
)

const (
	simDriver      = "gpu.sim.draplane.dev"
	controllerNS   = "kube-system"
	controllerName = "draplane-controllers"
	simulatorLease = "draplane-simulator"
)

// etcdCluster is a real etcd cluster, one etcdmember process per member,
// on free loopback ports.
type etcdCluster struct {
	members []*process
	// Servers is the --etcd-servers value.
	Servers string
}

func startEtcdCluster(t *testing.T, n int) *etcdCluster {
	t.Helper()
	var peers, clients []string
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("m%d", i))
		// freePort never returns 2379/2380 in practice; etcdmember
		// refuses them anyway.
		clients = append(clients, fmt.Sprintf("http://127.0.0.1:%d", testenv.MustFreePort(t)))
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", testenv.MustFreePort(t)))
	}
	var initial []string
	for i := range n {
		initial = append(initial, names[i]+"="+peers[i])
	}
	c := &etcdCluster{Servers: strings.Join(clients, ",")}
	base := t.TempDir()
	for i := range n {
		p := &process{Name: names[i], Binary: etcdBinary, Args: []string{
			"--name", names[i], "--data-dir", filepath.Join(base, names[i]),
			"--client-url", clients[i], "--peer-url", peers[i],
			"--initial-cluster", strings.Join(initial, ","),
			// Durability is tested with the embedded etcd; here the
			// members only need to agree.
			"--unsafe-no-fsync",
		}}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		c.members = append(c.members, p)
	}
	for _, p := range c.members {
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, readyTimeout, true, func(context.Context) (bool, error) {
			if !p.Running() {
				return false, fmt.Errorf("exited")
			}
			return strings.Contains(p.Output(), "ready"), nil
		})
		if err != nil {
			t.Fatalf("etcd member %s: %v\n%s", p.Name, err, p.Output())
		}
	}
	t.Logf("etcd cluster of %d members: %s", n, c.Servers)
	return c
}

// leaderArgs are short leader-election timings for the replicas.
func leaderArgs(lease, renew, retry time.Duration) []string {
	return []string{
		"--leader-elect-lease-duration", lease.String(),
		"--leader-elect-renew-deadline", renew.String(),
		"--leader-elect-retry-period", retry.String(),
	}
}

var (
	becameLeader          = regexp.MustCompile(`Became leader, starting controllers".*identity="([^"]+)"`)
	becameSimulatorLeader = regexp.MustCompile(`Became leader, starting the simulator".*identity="([^"]+)"`)
)

// leaderTerms are the identities with which a replica started the
// controllers in its current run.
func leaderTerms(s *server) []string {
	var ids []string
	for _, m := range becameLeader.FindAllStringSubmatch(s.Output(), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// holder reads the Lease name through s: its holder and when it was
// acquired, nothing while there is none or s does not answer (a replica
// may be restarting; callers poll).
func holder(ctx context.Context, t *testing.T, s *server, name string) (string, *metav1.MicroTime) {
	t.Helper()
	id, acquired, _ := readLease(ctx, s.KubeClient(t), name)
	return id, acquired
}

// readLease reads the Lease name in controllerNS through kube; a Lease
// that does not exist has no holder.
func readLease(ctx context.Context, kube kubernetes.Interface, name string) (string, *metav1.MicroTime, error) {
	lease, err := kube.CoordinationV1().Leases(controllerNS).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), lease.Spec.AcquireTime, nil
}

func templatePod(name, template string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}},
		},
	}
}

func sharedClaimPod(name, claim string) *corev1.Pod {
	pod := templatePod(name, "")
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
	return pod
}

func oneGPUClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: simDriver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + simDriver + `"`},
		}}},
	}
}

func gpuClaimSpec(count int64) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name:    "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: simDriver, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count},
	}}}}
}

func gpuTemplate(name string, count int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: gpuClaimSpec(count)},
	}
}

// claimsOwnedBy lists the claims whose controller is the pod with uid.
func claimsOwnedBy(claims []resourcev1.ResourceClaim, uid string) []string {
	var names []string
	for _, c := range claims {
		for _, ref := range c.OwnerReferences {
			if string(ref.UID) == uid {
				names = append(names, c.Name)
			}
		}
	}
	return names
}
