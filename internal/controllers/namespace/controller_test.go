package namespace

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

var (
	claimsResource    = schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceclaims"}
	templatesResource = schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceclaimtemplates"}
	// The discovery documents of the served resources, including a
	// cluster-scoped one and subresources, which must be skipped.
	servedResources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"create", "delete", "deletecollection", "get", "list", "watch"}},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "update"}},
			{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
			{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: []string{"create", "delete", "get", "list"}},
		}},
		{GroupVersion: "resource.draplane.dev/v1", APIResources: []metav1.APIResource{
			{Name: "resourceclaims", Namespaced: true, Kind: "ResourceClaim", Verbs: []string{"delete", "get", "list"}},
			{Name: "resourceclaimtemplates", Namespaced: true, Kind: "ResourceClaimTemplate", Verbs: []string{"delete", "get", "list"}},
			{Name: "deviceclasses", Namespaced: false, Kind: "DeviceClass", Verbs: []string{"delete", "get", "list"}},
		}},
	}
	listKinds = map[schema.GroupVersionResource]string{
		podsResource:      "PodList",
		claimsResource:    "ResourceClaimList",
		templatesResource: "ResourceClaimTemplateList",
	}
	testNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
)

func object(gvr schema.GroupVersionResource, kind, namespace, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(gvr.GroupVersion().String())
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetUID(types.UID("uid-" + namespace + "-" + name))
	for _, m := range mutate {
		m(obj)
	}
	return obj
}

func pod(namespace, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	return object(podsResource, "Pod", namespace, name, mutate...)
}

func claim(namespace, name string, mutate ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	return object(claimsResource, "ResourceClaim", namespace, name, mutate...)
}

func deletedAt(t time.Time, finalizers ...string) func(*unstructured.Unstructured) {
	return func(obj *unstructured.Unstructured) {
		obj.SetDeletionTimestamp(&metav1.Time{Time: t})
		obj.SetFinalizers(finalizers)
	}
}

func namespace(name string, terminating bool) *corev1.Namespace {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	if terminating {
		ns.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
		ns.Status.Phase = corev1.NamespaceTerminating
	}
	return ns
}

type fixture struct {
	controller *Controller
	client     *fake.Clientset
	dynamic    *dynamicfake.FakeDynamicClient
	mu         sync.Mutex
	finalized  []*corev1.Namespace
}

func newFixture(t *testing.T, namespaces []*corev1.Namespace, objects []runtime.Object) *fixture {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	var nsObjects []runtime.Object
	for _, ns := range namespaces {
		nsObjects = append(nsObjects, ns)
	}
	client := fake.NewSimpleClientset(nsObjects...)
	client.Discovery().(*fakediscovery.FakeDiscovery).Resources = servedResources
	f := &fixture{client: client, dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...)}
	// The fake clientset does not implement the finalize subresource:
	// record the call and delete the namespace when no finalizer is left,
	// as the real storage does.
	client.PrependReactor("create", "namespaces", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "finalize" {
			return false, nil, nil
		}
		ns := action.(clienttesting.CreateAction).GetObject().(*corev1.Namespace)
		f.mu.Lock()
		f.finalized = append(f.finalized, ns.DeepCopy())
		f.mu.Unlock()
		if len(ns.Spec.Finalizers) == 0 {
			if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns.Name); err != nil {
				return true, nil, err
			}
		}
		return true, ns, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Namespaces()
	f.controller = NewController(logger, client, f.dynamic, client.Discovery(), informer)
	f.controller.now = func() time.Time { return testNow }
	for _, ns := range namespaces {
		if err := informer.Informer().GetIndexer().Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// remaining returns namespace/name of every object left in the dynamic
// client.
func (f *fixture) remaining(t *testing.T) []string {
	t.Helper()
	var out []string
	for gvr := range listKinds {
		list, err := f.dynamic.Resource(gvr).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			out = append(out, gvr.Resource+":"+item.GetNamespace()+"/"+item.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func (f *fixture) finalizedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ns := range f.finalized {
		if slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			continue
		}
		out = append(out, ns.Name)
	}
	return out
}

func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name          string
		namespaces    []*corev1.Namespace
		objects       []runtime.Object
		sync          string
		wantRemaining []string
		wantFinalized []string
		// wantRetryAfter > 0 expects a contentRemainingError with this
		// estimate; wantErr expects some other error.
		wantRetryAfter time.Duration
		wantErr        bool
		// wantConditions are condition messages expected in the namespace
		// status afterwards, by type (True conditions only).
		wantConditions map[corev1.NamespaceConditionType]string
	}{
		{
			name:       "terminating namespace is emptied and finalized",
			namespaces: []*corev1.Namespace{namespace("doomed", true), namespace("alive", false)},
			objects: []runtime.Object{
				pod("doomed", "unbound"),
				claim("doomed", "gpu"),
				object(templatesResource, "ResourceClaimTemplate", "doomed", "gpu-template"),
				claim("alive", "gpu"),
				pod("alive", "web"),
			},
			sync:          "doomed",
			wantRemaining: []string{"pods:alive/web", "resourceclaims:alive/gpu"},
			wantFinalized: []string{"doomed"},
		},
		{
			name:          "live namespace is left alone",
			namespaces:    []*corev1.Namespace{namespace("alive", false)},
			objects:       []runtime.Object{pod("alive", "web")},
			sync:          "alive",
			wantRemaining: []string{"pods:alive/web"},
		},
		{
			name:       "namespace already finalized by us",
			namespaces: []*corev1.Namespace{func() *corev1.Namespace { ns := namespace("doomed", true); ns.Spec.Finalizers = nil; return ns }()},
			objects:    []runtime.Object{pod("doomed", "left")},
			sync:       "doomed",
			// Without our finalizer the namespace is none of our business.
			wantRemaining: []string{"pods:doomed/left"},
		},
		{
			name:           "pod within its grace period is waited for",
			namespaces:     []*corev1.Namespace{namespace("doomed", true)},
			objects:        []runtime.Object{pod("doomed", "stopping", deletedAt(testNow.Add(20*time.Second))), claim("doomed", "gpu")},
			sync:           "doomed",
			wantRemaining:  []string{"pods:doomed/stopping"},
			wantRetryAfter: 20 * time.Second,
			wantConditions: map[corev1.NamespaceConditionType]string{
				corev1.NamespaceContentRemaining: "Some resources are remaining: pods has 1 resource instances",
			},
		},
		{
			name:          "pod past its grace period is force-deleted",
			namespaces:    []*corev1.Namespace{namespace("doomed", true)},
			objects:       []runtime.Object{pod("doomed", "stuck", deletedAt(testNow.Add(-time.Second)))},
			sync:          "doomed",
			wantFinalized: []string{"doomed"},
		},
		{
			name:          "object waiting for its finalizers blocks finalization",
			namespaces:    []*corev1.Namespace{namespace("doomed", true)},
			objects:       []runtime.Object{claim("doomed", "gpu", deletedAt(testNow, "resource.draplane.dev/delete-protection"))},
			sync:          "doomed",
			wantRemaining: []string{"resourceclaims:doomed/gpu"},
			wantErr:       true,
			wantConditions: map[corev1.NamespaceConditionType]string{
				corev1.NamespaceContentRemaining:    "Some resources are remaining: resourceclaims.resource.draplane.dev has 1 resource instances",
				corev1.NamespaceFinalizersRemaining: "Some content in the namespace has finalizers remaining: resource.draplane.dev/delete-protection has 1 resource instances",
			},
		},
		{
			name:       "namespace gone",
			namespaces: nil,
			sync:       "doomed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, tc.namespaces, tc.objects)
			err := f.controller.sync(ctx, tc.sync)
			var remaining *contentRemainingError
			switch {
			case tc.wantRetryAfter > 0:
				if !errors.As(err, &remaining) || remaining.estimate != tc.wantRetryAfter {
					t.Errorf("got error %v, want content remaining with retry after %s", err, tc.wantRetryAfter)
				}
			case tc.wantErr:
				if err == nil {
					t.Error("got no error")
				}
			case err != nil:
				t.Errorf("unexpected error: %v", err)
			}
			if got := f.remaining(t); !slices.Equal(got, tc.wantRemaining) {
				t.Errorf("remaining objects %v, want %v", got, tc.wantRemaining)
			}
			if got := f.finalizedNames(); !slices.Equal(got, tc.wantFinalized) {
				t.Errorf("finalized %v, want %v", got, tc.wantFinalized)
			}
			if tc.wantConditions != nil {
				ns, err := f.client.CoreV1().Namespaces().Get(ctx, tc.sync, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got := map[corev1.NamespaceConditionType]string{}
				for _, condition := range ns.Status.Conditions {
					if condition.Status == corev1.ConditionTrue {
						got[condition.Type] = condition.Message
					}
				}
				if !maps.Equal(got, tc.wantConditions) {
					t.Errorf("true conditions %v, want %v", got, tc.wantConditions)
				}
				if len(ns.Status.Conditions) != len(reportedConditions) {
					t.Errorf("%d conditions, want %d", len(ns.Status.Conditions), len(reportedConditions))
				}
			}
		})
	}
}

// TestRun drives the controller through its informer and queue: a
// namespace marked for deletion is emptied and finalized.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	logger, _ := ktesting.NewTestContext(t)
	client := fake.NewSimpleClientset(namespace("doomed", true))
	client.Discovery().(*fakediscovery.FakeDiscovery).Resources = servedResources
	dynamic := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, pod("doomed", "p"), claim("doomed", "c"))
	finalized := make(chan string, 1)
	client.PrependReactor("create", "namespaces", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "finalize" {
			return false, nil, nil
		}
		ns := action.(clienttesting.CreateAction).GetObject().(*corev1.Namespace)
		select {
		case finalized <- ns.Name:
		default:
		}
		return true, ns, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	controller := NewController(logger, client, dynamic, client.Discovery(), factory.Core().V1().Namespaces())
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is cancelled.
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	go controller.Run(ctx, 1)

	select {
	case name := <-finalized:
		if name != "doomed" {
			t.Errorf("finalized %q, want doomed", name)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("namespace was not finalized")
	}
	for _, gvr := range []schema.GroupVersionResource{podsResource, claimsResource} {
		list, err := dynamic.Resource(gvr).Namespace("doomed").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			t.Errorf("%s left in the namespace: %d", gvr.Resource, len(list.Items))
		}
	}
}
