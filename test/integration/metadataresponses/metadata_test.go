// Package metadataresponses checks codec.WriteForMetadata against the real
// server: the writes of the simulator and the driver publisher that keep
// only the written object's metadata.
package metadataresponses

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/generated/clientset/versioned/scheme"
	"github.com/draplane/draplane/internal/codec"
	"github.com/draplane/draplane/internal/resourceclient"
	"github.com/draplane/draplane/test/integration/framework"
)

func TestWriteForMetadata(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	config := rest.CopyConfig(framework.StartServer(ctx, t, &wg, false))
	// Every response body, to check that writes got the metadata only.
	bodies := &recorder{}
	config.Wrap(bodies.wrap)
	kube := kubernetes.NewForConfigOrDie(config)

	t.Run("node create", func(t *testing.T) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"zone": "a"}},
			Spec: corev1.NodeSpec{ProviderID: "sim://in-the-spec-only"}}
		opts := metav1.CreateOptions{FieldManager: "metadata-test"}
		post := func(c *rest.RESTClient) *rest.Request {
			return c.Post().Resource("nodes").VersionedParams(&opts, kubescheme.ParameterCodec)
		}
		written, err := bodies.write(ctx, t, kube.CoreV1().RESTClient(), post, node, "in-the-spec-only")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		stored, err := kube.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkMeta(t, written, &stored.ObjectMeta)
		if stored.Labels["zone"] != "a" {
			t.Errorf("stored labels %v, want zone=a", stored.Labels)
		}
		if len(stored.ManagedFields) != 1 || stored.ManagedFields[0].Manager != "metadata-test" {
			t.Errorf("stored managedFields %+v, want one entry of metadata-test", stored.ManagedFields)
		}
		// The simulator tells an existing node by the error.
		if _, err := bodies.write(ctx, t, kube.CoreV1().RESTClient(), post, node, ""); !apierrors.IsAlreadyExists(err) {
			t.Errorf("second create: %v, want AlreadyExists", err)
		}
	})

	ours := versioned.NewForConfigOrDie(config)
	upstream, err := resourceclient.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, slice string
		client      versioned.Interface
	}{
		{"slice of resource.draplane.dev", "slice-ours", ours},
		{"slice of resource.k8s.io", "slice-upstream", upstream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slices := tc.client.ResourceV1()
			slice := &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: tc.slice},
				Spec: resourcev1.ResourceSliceSpec{
					Driver:   "gpu.example.com",
					NodeName: ptr.To("node-a"),
					Pool:     resourcev1.ResourcePool{Name: "pool", ResourceSliceCount: 1},
					Devices:  []resourcev1.Device{{Name: "gpu-0"}},
				},
			}
			get := func() *resourcev1.ResourceSlice {
				stored, err := slices.ResourceSlices().Get(ctx, slice.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return stored
			}
			copts := metav1.CreateOptions{FieldManager: "metadata-test"}
			created, err := bodies.write(ctx, t, slices.RESTClient(), func(c *rest.RESTClient) *rest.Request {
				return c.Post().Resource("resourceslices").VersionedParams(&copts, scheme.ParameterCodec)
			}, slice, "gpu.example.com")
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			stored := get()
			checkMeta(t, created, &stored.ObjectMeta)

			stale := stored.DeepCopy()
			stored.Spec.Devices = append(stored.Spec.Devices, resourcev1.Device{Name: "gpu-1"})
			uopts := metav1.UpdateOptions{FieldManager: "metadata-test"}
			put := func(c *rest.RESTClient) *rest.Request {
				return c.Put().Resource("resourceslices").Name(stored.Name).VersionedParams(&uopts, scheme.ParameterCodec)
			}
			updated, err := bodies.write(ctx, t, slices.RESTClient(), put, stored, "gpu.example.com")
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			after := get()
			checkMeta(t, updated, &after.ObjectMeta)
			if updated.GetResourceVersion() == created.GetResourceVersion() {
				t.Errorf("update returned the create's resourceVersion %s", created.GetResourceVersion())
			}
			if len(after.Spec.Devices) != 2 {
				t.Errorf("stored devices %v, want gpu-0 and gpu-1", after.Spec.Devices)
			}
			// A stale write fails as a typed client's would.
			if _, err := bodies.write(ctx, t, slices.RESTClient(), put, stale, ""); !apierrors.IsConflict(err) {
				t.Errorf("stale update: %v, want a conflict", err)
			}
		})
	}
}

// TestWriteForMetadataFake: a fake clientset has no REST client; the
// full write is used and its object's metadata returned.
func TestWriteForMetadataFake(t *testing.T) {
	ctx := context.Background()
	kube := kubefake.NewClientset()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	written, err := codec.WriteForMetadata(ctx, kube.CoreV1().RESTClient(), func(c *rest.RESTClient) *rest.Request {
		t.Fatal("the fake's REST client was used")
		return nil
	}, node, func() (*corev1.Node, error) {
		return kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if written.GetName() != "node-a" {
		t.Errorf("written %q, want node-a", written.GetName())
	}
	if _, err := kube.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Errorf("the fake holds no node: %v", err)
	}
}

// checkMeta compares what a write returned with what the server stores.
func checkMeta(t *testing.T, written metav1.Object, stored *metav1.ObjectMeta) {
	t.Helper()
	if written.GetName() != stored.Name || written.GetUID() != stored.UID || written.GetResourceVersion() != stored.ResourceVersion {
		t.Errorf("write returned name %q, uid %q, resourceVersion %q; stored %q, %q, %q",
			written.GetName(), written.GetUID(), written.GetResourceVersion(), stored.Name, stored.UID, stored.ResourceVersion)
	}
	if written.GetUID() == "" || written.GetResourceVersion() == "" {
		t.Errorf("write returned no uid or resourceVersion: %q, %q", written.GetUID(), written.GetResourceVersion())
	}
	if len(written.GetManagedFields()) != len(stored.ManagedFields) {
		t.Errorf("write returned %d managedFields entries, stored %d", len(written.GetManagedFields()), len(stored.ManagedFields))
	}
}

// recorder keeps the bodies of the responses a client receives.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	})
}

// write writes obj with codec.WriteForMetadata through c, a real REST
// client, and unless it fails, checks that the one response carried the
// metadata only, without specContent.
func (r *recorder) write(ctx context.Context, t *testing.T, c rest.Interface, req func(*rest.RESTClient) *rest.Request, obj runtime.Object, specContent string) (metav1.Object, error) {
	t.Helper()
	r.mu.Lock()
	r.bodies = nil
	r.mu.Unlock()
	written, err := codec.WriteForMetadata(ctx, c, req, obj, func() (metav1.Object, error) {
		t.Fatal("a real client wrote the whole object")
		return nil, nil
	})
	if err == nil {
		r.checkMetadataOnly(t, specContent)
	}
	return written, err
}

// checkMetadataOnly fails unless exactly one response came since write began,
// a PartialObjectMetadata without specContent, a string of the written
// object outside its metadata.
func (r *recorder) checkMetadataOnly(t *testing.T, specContent string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) != 1 {
		t.Fatalf("%d responses, want 1", len(r.bodies))
	}
	body := r.bodies[0]
	if !bytes.Contains(body, []byte("PartialObjectMetadata")) || bytes.Contains(body, []byte(specContent)) {
		t.Errorf("response is not the metadata only: %q", body)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
