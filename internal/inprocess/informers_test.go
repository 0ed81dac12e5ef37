package inprocess

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"

	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// TestDropManagedFields: cached objects carry no managedFields; other
// metadata and tombstones pass unchanged.
func TestDropManagedFields(t *testing.T) {
	tests := []struct {
		name string
		obj  any
		want func(t *testing.T, got any)
	}{
		{
			name: "pod with managedFields",
			obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}},
			want: func(t *testing.T, got any) {
				pod := got.(*corev1.Pod)
				if pod.ManagedFields != nil || pod.Labels["a"] != "b" || pod.Name != "p" {
					t.Errorf("got %+v, want the pod without managedFields", pod.ObjectMeta)
				}
			},
		},
		{
			name: "tombstone",
			obj:  cache.DeletedFinalStateUnknown{Key: "ns/p"},
			want: func(t *testing.T, got any) {
				if tomb, ok := got.(cache.DeletedFinalStateUnknown); !ok || tomb.Key != "ns/p" {
					t.Errorf("got %#v, want the tombstone", got)
				}
			},
		},
		{
			name: "not an object",
			obj:  "x",
			want: func(t *testing.T, got any) {
				if got != "x" {
					t.Errorf("got %#v", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DropManagedFields(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, got)
		})
	}
}

// TestCompact: the resource informers' transform drops managedFields and
// lets identical devices of different slices share their maps.
func TestCompact(t *testing.T) {
	slice := func(name string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "driver"}}},
			Spec: resourcev1.ResourceSliceSpec{Devices: []resourcev1.Device{{
				Name:       "gpu-0",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("a100")}},
				Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
			}}},
		}
	}
	var got []*resourcev1.ResourceSlice
	for _, name := range []string{"a", "b"} {
		obj, err := compact(slice(name))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, obj.(*resourcev1.ResourceSlice))
	}
	if got[0].ManagedFields != nil || got[1].ManagedFields != nil {
		t.Error("managedFields kept")
	}
	a, b := got[0].Spec.Devices[0], got[1].Spec.Devices[0]
	if reflect.ValueOf(a.Attributes).UnsafePointer() != reflect.ValueOf(b.Attributes).UnsafePointer() ||
		reflect.ValueOf(a.Capacity).UnsafePointer() != reflect.ValueOf(b.Capacity).UnsafePointer() {
		t.Error("identical devices of two slices keep maps of their own")
	}
	if tomb, err := compact(cache.DeletedFinalStateUnknown{Key: "a"}); err != nil || tomb.(cache.DeletedFinalStateUnknown).Key != "a" {
		t.Errorf("tombstone: %#v, %v", tomb, err)
	}
}

// TestCompactKube: the kube informers on the server's own objects keep a
// pod's managedFields, with the strings most entries share made one copy,
// and drop every other object's.
func TestCompactKube(t *testing.T) {
	entry := func() metav1.ManagedFieldsEntry {
		// Strings built at run time, as a decoder makes them.
		fresh := func(s string) string { return string([]byte(s)) }
		return metav1.ManagedFieldsEntry{Manager: fresh("kubectl"), Operation: metav1.ManagedFieldsOperationType(fresh("Update")),
			APIVersion: fresh("v1"), FieldsType: fresh("FieldsV1"), Subresource: fresh("status")}
	}
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b"} {
		obj, err := compactKube(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{entry()}}})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, obj.(*corev1.Pod))
	}
	a, b := pods[0].ManagedFields, pods[1].ManagedFields
	if len(a) != 1 || len(b) != 1 || a[0] != entry() {
		t.Fatalf("pods' managedFields %+v and %+v, want one entry %+v each", a, b, entry())
	}
	for name, pair := range map[string][2]string{
		"manager": {a[0].Manager, b[0].Manager}, "operation": {string(a[0].Operation), string(b[0].Operation)},
		"apiVersion": {a[0].APIVersion, b[0].APIVersion}, "fieldsType": {a[0].FieldsType, b[0].FieldsType}, "subresource": {a[0].Subresource, b[0].Subresource},
	} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("the two pods' %s strings are two copies", name)
		}
	}
	node, err := compactKube(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{entry()}}})
	if err != nil || node.(*corev1.Node).ManagedFields != nil {
		t.Errorf("node: %+v, %v, want it without managedFields", node, err)
	}
}

// TestGuessPods: a guess is a copy of the informer's pod, managedFields
// included; a pod the informer does not have, or has without
// managedFields, is no guess.
func TestGuessPods(t *testing.T) {
	kube := kubefake.NewClientset()
	shared := &Informers{Kube: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(compactKube))}
	guess := shared.GuessPods()
	indexer := shared.Kube.Core().V1().Pods().Informer().GetIndexer()
	managed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "managed", Namespace: "ns", ResourceVersion: "7",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns", ResourceVersion: "8"}}
	for _, pod := range []*corev1.Pod{managed, bare} {
		if err := indexer.Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := guess("ns/managed").(*corev1.Pod)
	if !ok || got == managed || !reflect.DeepEqual(got, managed) {
		t.Errorf("guess of ns/managed: %+v, want a copy of %+v", got, managed)
	}
	got.Labels = map[string]string{"changed": "true"}
	if managed.Labels != nil {
		t.Error("changing the guess changed the informer's pod")
	}
	for _, key := range []string{"ns/bare", "ns/missing", "other/managed"} {
		if got := guess(key); got != nil {
			t.Errorf("guess of %s: %+v, want nil", key, got)
		}
	}
}

// TestGuessClaims: a guess is the informer's claim, managedFields
// included, as the type claims are stored as, sharing nothing with the
// informer's copy; a claim without managedFields is no guess. The
// resource informers on the server's own objects keep claims'
// managedFields and drop the others'.
func TestGuessClaims(t *testing.T) {
	shared := &Informers{Resource: resourceinformers.NewSharedInformerFactoryWithOptions(resourcefake.NewSimpleClientset(), 0, resourceinformers.WithTransform(compactOwn))}
	guess := shared.GuessClaims()
	indexer := shared.Resource.Resource().V1().ResourceClaims().Informer().GetIndexer()
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "managed", Namespace: "ns", ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}},
	}
	kept, err := compactOwn(claim)
	if err != nil || len(kept.(*resourcev1.ResourceClaim).ManagedFields) != 1 {
		t.Fatalf("compactOwn dropped the claim's managedFields: %+v, %v", kept, err)
	}
	bare := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns", ResourceVersion: "8"}}
	for _, c := range []*resourcev1.ResourceClaim{claim, bare} {
		if err := indexer.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := guess("ns/managed").(*resourceapi.ResourceClaim)
	if !ok {
		t.Fatalf("guess of ns/managed is %T, want *resource.ResourceClaim", guess("ns/managed"))
	}
	if got.Name != "managed" || got.ResourceVersion != "7" || len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != "kubectl" ||
		len(got.Spec.Devices.Requests) != 1 || got.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu.example.com" {
		t.Errorf("guess of ns/managed: %+v, want the claim", got)
	}
	got.Spec.Devices.Requests[0].Name = "changed"
	got.ManagedFields[0].Manager = "changed"
	if claim.Spec.Devices.Requests[0].Name != "gpu" || claim.ManagedFields[0].Manager != "kubectl" {
		t.Error("changing the guess changed the informer's claim")
	}
	for _, key := range []string{"ns/bare", "ns/missing"} {
		if got := guess(key); got != nil {
			t.Errorf("guess of %s: %+v, want nil", key, got)
		}
	}
	slice, err := compactOwn(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "driver"}}}})
	if err != nil || slice.(*resourcev1.ResourceSlice).ManagedFields != nil {
		t.Errorf("slice: %+v, %v, want it without managedFields", slice, err)
	}
}

// recorder counts the pods a handler was told about.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	add := func(obj any) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seen[obj.(*corev1.Pod).Name]++
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
}

func (r *recorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[name]
}

// TestTermsOnSharedInformers: a term's handlers stop receiving events when
// the term ends, the next term gets the cache replayed and the new events,
// the indexes a term adds may be added again by the next, and the shared
// informers keep running for the process.
func TestTermsOnSharedInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset()
	shared := &Informers{
		Kube:     informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(DropManagedFields)),
		Resource: resourceinformers.NewSharedInformerFactory(resourcefake.NewSimpleClientset(), 0),
	}
	defer func() {
		cancel()
		shared.Shutdown()
	}()
	create := func(name string) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "test"}}}}
		if _, err := kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	index := cache.Indexers{"byName": func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Name}, nil }}

	// Term 1 registers a handler and an index, then starts the informers.
	first := newTerm(shared, ctx.Done())
	pods := first.Core().Pods().Informer()
	if err := pods.AddIndexers(index); err != nil {
		t.Fatalf("term 1 AddIndexers: %v", err)
	}
	one := &recorder{seen: map[string]int{}}
	if _, err := pods.AddEventHandler(one.handler()); err != nil {
		t.Fatal(err)
	}
	termCtx, endTerm := context.WithCancel(ctx)
	kubeTermFactory{first}.Start(termCtx.Done())
	create("a")
	eventually("term 1 sees pod a", func() bool { return one.count("a") == 1 })
	endTerm()
	first.end()

	// Term 2: the same index again, a fresh handler; the informers still
	// run although term 1's stop channel is closed.
	second := newTerm(shared, ctx.Done())
	pods = second.Core().Pods().Informer()
	if err := pods.AddIndexers(index); err != nil {
		t.Fatalf("term 2 AddIndexers of the same index: %v", err)
	}
	two := &recorder{seen: map[string]int{}}
	if _, err := pods.AddEventHandler(two.handler()); err != nil {
		t.Fatal(err)
	}
	eventually("term 2 gets pod a replayed", func() bool { return two.count("a") == 1 })
	create("b")
	eventually("term 2 sees pod b", func() bool { return two.count("b") == 1 })
	if got := one.count("b"); got != 0 {
		t.Errorf("term 1's handler saw pod b %d times after the term ended", got)
	}
	objs, err := pods.GetIndexer().ByIndex("byName", "b")
	if err != nil || len(objs) != 1 {
		t.Fatalf("index byName b: %v, %v", objs, err)
	}
	if mf := objs[0].(*corev1.Pod).ManagedFields; mf != nil {
		t.Errorf("cached pod has managedFields %v", mf)
	}
}
