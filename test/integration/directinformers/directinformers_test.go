// Package directinformers checks the shared informers of the server's
// process against the real server: those of its own objects list and
// watch the stores without the HTTP handlers (server.InProcess.Source),
// and hold what an unmodified client-go client reads over the network.
package directinformers

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/internal/inprocess"
	"github.com/draplane/draplane/test/integration/framework"
)

func slice(name, node string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{
				Name: "gpu-0",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"model": {StringValue: ptr.To("a100")},
				},
			}},
		},
	}
}

func TestDirectInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	config, admin := framework.StartServerWithConfig(ctx, t, &wg, false, "")
	kube := kubernetes.NewForConfigOrDie(admin)
	client := versioned.NewForConfigOrDie(admin)
	inProcess := config.Extra.InProcess

	// The process's shared informers, as the controllers get them.
	shared, err := inProcess.Informers(config.Generic.LoopbackClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	slices := shared.Resource.Resource().V1().ResourceSlices()
	pods := shared.Kube.Core().V1().Pods()
	slicesInformer, podsInformer := slices.Informer(), pods.Informer()
	shared.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), slicesInformer.HasSynced, podsInformer.HasSynced) {
		t.Fatal("informers not synced")
	}

	t.Run("objects as a client reads them", func(t *testing.T) {
		created, err := client.ResourceV1().ResourceSlices().Create(ctx, slice("watched", "node-a"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := kube.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cached := waitFor(ctx, t, func() (*resourcev1.ResourceSlice, error) { return slices.Lister().Get("watched") })
		read, err := client.ResourceV1().ResourceSlices().Get(ctx, "watched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if read.ResourceVersion != created.ResourceVersion {
			t.Fatalf("read resourceVersion %s, created %s", read.ResourceVersion, created.ResourceVersion)
		}
		// The informers drop managedFields, and a typed client decodes
		// without the TypeMeta.
		read.ManagedFields = nil
		if diff := cmp.Diff(read, cached); diff != "" {
			t.Errorf("informer's slice differs from the server's (-read +cached):\n%s", diff)
		}
		cachedPod := waitFor(ctx, t, func() (*corev1.Pod, error) { return pods.Lister().Pods(metav1.NamespaceDefault).Get("watched") })
		readPod, err := kube.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "watched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Pods keep their managedFields (inprocess.GuessPods).
		if diff := cmp.Diff(readPod, cachedPod); diff != "" {
			t.Errorf("informer's pod differs from the server's (-read +cached):\n%s", diff)
		}
	})

	t.Run("no watch through the handlers", func(t *testing.T) {
		metrics, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		direct := `draplane_apiserver_inprocess_watches{group="resource.draplane.dev",resource="resourceslices"} 1`
		if !strings.Contains(string(metrics), direct+"\n") {
			t.Errorf("no %s in /metrics", direct)
		}
		for _, line := range strings.Split(string(metrics), "\n") {
			if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) || strings.HasSuffix(line, " 0") {
				continue
			}
			for _, gvr := range inprocess.DirectResources() {
				if strings.Contains(line, `resource="`+gvr.Resource+`"`) && strings.Contains(line, `group="`+gvr.Group+`"`) {
					t.Errorf("a watch of %s runs through the handlers: %s", gvr, line)
				}
			}
		}
	})

	// What an informer is given is its own: changing it changes nothing
	// the server serves (the watch cache's objects), listed or watched.
	t.Run("copies", func(t *testing.T) {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice("listed", "node-b"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		src := inProcess.Source()
		gvr := resourcev1.SchemeGroupVersion.WithResource("resourceslices")
		list, err := src.List(ctx, gvr, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		w, err := src.Watch(ctx, gvr, metav1.ListOptions{ResourceVersion: list.(*resourcev1.ResourceSliceList).ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice("then-watched", "node-c"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var watched *resourcev1.ResourceSlice
		select {
		case event := <-w.ResultChan():
			watched = event.Object.(*resourcev1.ResourceSlice)
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatal("no watch event")
		}
		if kind := watched.GetObjectKind().GroupVersionKind(); !kind.Empty() {
			t.Errorf("watched object has kind %v, want none as a typed client decodes", kind)
		}
		changed := []*resourcev1.ResourceSlice{watched}
		for i := range list.(*resourcev1.ResourceSliceList).Items {
			changed = append(changed, &list.(*resourcev1.ResourceSliceList).Items[i])
		}
		for _, s := range changed {
			s.Labels = map[string]string{"changed": "yes"}
			s.Spec.Devices[0].Name = "changed"
			s.Spec.Devices[0].Attributes["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To("changed")}
		}
		// resourceVersion 0: from the watch cache.
		served, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if len(served.Items) != 3 {
			t.Fatalf("served %d slices, want 3", len(served.Items))
		}
		for _, s := range served.Items {
			if s.Labels["changed"] != "" || s.Spec.Devices[0].Name != "gpu-0" || *s.Spec.Devices[0].Attributes["model"].StringValue != "a100" {
				t.Errorf("the server serves slice %s as changed in an informer's copy: %+v", s.Name, s)
			}
		}
	})

	t.Run("field selector", func(t *testing.T) {
		list, err := inProcess.Source().List(ctx, resourcev1.SchemeGroupVersion.WithResource("resourceslices"),
			metav1.ListOptions{FieldSelector: "spec.nodeName=node-b"})
		if err != nil {
			t.Fatal(err)
		}
		items := list.(*resourcev1.ResourceSliceList).Items
		if len(items) != 1 || items[0].Name != "listed" {
			t.Errorf("spec.nodeName=node-b listed %d slices, want slice listed", len(items))
		}
		_, err = inProcess.Source().List(ctx, resourcev1.SchemeGroupVersion.WithResource("resourceslices"),
			metav1.ListOptions{FieldSelector: "spec.no.such.field=x"})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("unknown field selector: got %v, want a BadRequest", err)
		}
		_, err = inProcess.Source().List(ctx, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, metav1.ListOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("a resource without a store: got %v, want NotFound", err)
		}
	})
}

// waitFor polls get until it finds its object.
func waitFor[T any](ctx context.Context, t *testing.T, get func() (T, error)) T {
	t.Helper()
	var got T
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		var err error
		got, err = get()
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("not in the informer: %v", err)
	}
	return got
}
