package pod

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

const testNamespace = "test"

func newTestStorage(t *testing.T) *Storage {
	t.Helper()
	storage, err := NewStorage(coretesting.NewRESTOptionsGetter(t))
	if err != nil {
		t.Fatal(err)
	}
	coretesting.Ready(t, storage.Pod.Store.Store)
	return storage
}

// newPod returns a defaulted pod, as the API would decode it.
func newPod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ctr", Image: "registry.example/app:1.0"}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	corescheme.SetDefaultsPod(pod)
	return pod
}

func createPod(ctx context.Context, t *testing.T, storage *Storage, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	obj, err := storage.Pod.Create(ctx, pod, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return obj.(*corev1.Pod)
}

func getPod(ctx context.Context, t *testing.T, storage *Storage, name string) (*corev1.Pod, error) {
	t.Helper()
	obj, err := storage.Pod.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

func bind(ctx context.Context, storage *Storage, name, node string, uid types.UID) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	_, err := storage.Binding.Create(ctx, name, binding, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	return err
}

func TestPodStorage(t *testing.T) {
	storage := newTestStorage(t)
	ctx := coretesting.Context(t, testNamespace)

	t.Run("create sets status and rejects invalid pods", func(t *testing.T) {
		pod := newPod("created")
		pod.Status.Phase = corev1.PodRunning
		created := createPod(ctx, t, storage, pod)
		if created.Status.Phase != corev1.PodPending || created.Status.QOSClass != corev1.PodQOSBestEffort || created.Generation != 1 {
			t.Errorf("got phase %q, qos %q, generation %d; want Pending, BestEffort, 1", created.Status.Phase, created.Status.QOSClass, created.Generation)
		}
		invalid := newPod("invalid", func(p *corev1.Pod) { p.Spec.Containers = nil })
		_, err := storage.Pod.Create(ctx, invalid, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		assertInvalidField(t, err, "spec.containers")
	})

	t.Run("binding", func(t *testing.T) {
		pod := createPod(ctx, t, storage, newPod("bind-me"))
		if err := bind(ctx, storage, "bind-me", "node-a", "wrong-uid"); !apierrors.IsConflict(err) {
			t.Errorf("bind with wrong uid: got %v, want conflict", err)
		}
		if err := bind(ctx, storage, "bind-me", "node-a", pod.UID); err != nil {
			t.Fatalf("bind: %v", err)
		}
		bound, err := getPod(ctx, t, storage, "bind-me")
		if err != nil {
			t.Fatal(err)
		}
		if bound.Spec.NodeName != "node-a" {
			t.Errorf("nodeName = %q, want node-a", bound.Spec.NodeName)
		}
		if !hasCondition(bound, corev1.PodScheduled, corev1.ConditionTrue) {
			t.Errorf("no PodScheduled=True condition in %+v", bound.Status.Conditions)
		}
		if err := bind(ctx, storage, "bind-me", "node-b", ""); !apierrors.IsConflict(err) {
			t.Errorf("second bind: got %v, want conflict", err)
		}
		if err := bind(ctx, storage, "no-such-pod", "node-a", ""); !apierrors.IsNotFound(err) {
			t.Errorf("bind missing pod: got %v, want not found", err)
		}
		if err := bind(ctx, storage, "bind-me", "", ""); !apierrors.IsInvalid(err) {
			t.Errorf("bind without target: got %v, want invalid", err)
		}
		gated := createPod(ctx, t, storage, newPod("gated", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
		}))
		if err := bind(ctx, storage, gated.Name, "node-a", ""); !apierrors.IsConflict(err) {
			t.Errorf("bind gated pod: got %v, want conflict", err)
		}
	})

	t.Run("nodeName cannot be set by update", func(t *testing.T) {
		pod := createPod(ctx, t, storage, newPod("update-node"))
		pod.Spec.NodeName = "node-a"
		_, _, err := storage.Pod.Update(ctx, pod.Name, rest.DefaultUpdatedObjectInfo(pod), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		assertInvalidField(t, err, "spec.nodeName")
	})

	t.Run("status update keeps the spec", func(t *testing.T) {
		pod := createPod(ctx, t, storage, newPod("status"))
		pod.Status.Phase = corev1.PodRunning
		pod.Spec.Containers[0].Image = "registry.example/other:2.0"
		obj, _, err := storage.Status.Update(ctx, pod.Name, rest.DefaultUpdatedObjectInfo(pod), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		updated := obj.(*corev1.Pod)
		if updated.Status.Phase != corev1.PodRunning || updated.Spec.Containers[0].Image != "registry.example/app:1.0" {
			t.Errorf("got phase %q image %q; want Running and the old image", updated.Status.Phase, updated.Spec.Containers[0].Image)
		}
		// And a spec update leaves the status alone.
		updated.Spec.Containers[0].Image = "registry.example/other:2.0"
		updated.Status.Phase = corev1.PodFailed
		obj, _, err = storage.Pod.Update(ctx, pod.Name, rest.DefaultUpdatedObjectInfo(updated), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		updated = obj.(*corev1.Pod)
		if updated.Status.Phase != corev1.PodRunning || updated.Spec.Containers[0].Image != "registry.example/other:2.0" || updated.Generation != 2 {
			t.Errorf("got phase %q image %q generation %d; want Running, the new image, 2", updated.Status.Phase, updated.Spec.Containers[0].Image, updated.Generation)
		}
	})

	t.Run("deletion", func(t *testing.T) {
		createPod(ctx, t, storage, newPod("unbound"))
		if _, _, err := storage.Pod.Delete(ctx, "unbound", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := getPod(ctx, t, storage, "unbound"); !apierrors.IsNotFound(err) {
			t.Errorf("unbound pod after delete: got %v, want not found", err)
		}

		pod := createPod(ctx, t, storage, newPod("bound"))
		if err := bind(ctx, storage, pod.Name, "node-a", pod.UID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := storage.Pod.Delete(ctx, pod.Name, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		terminating, err := getPod(ctx, t, storage, pod.Name)
		if err != nil {
			t.Fatalf("bound pod after graceful delete: %v", err)
		}
		if terminating.DeletionTimestamp == nil || ptr.Deref(terminating.DeletionGracePeriodSeconds, -1) != 30 {
			t.Errorf("got deletionTimestamp %v, grace %v; want set and 30", terminating.DeletionTimestamp, terminating.DeletionGracePeriodSeconds)
		}
		if _, _, err := storage.Pod.Delete(ctx, pod.Name, rest.ValidateAllObjectFunc, metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := getPod(ctx, t, storage, pod.Name); !apierrors.IsNotFound(err) {
			t.Errorf("bound pod after delete with grace 0: got %v, want not found", err)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		pod := createPod(ctx, t, storage, newPod("dry-run"))
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: testNamespace}, Target: corev1.ObjectReference{Name: "node-a"}}
		if _, err := storage.Binding.Create(ctx, pod.Name, binding, rest.ValidateAllObjectFunc, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: testNamespace}}
		if _, err := storage.Eviction.Create(ctx, pod.Name, eviction, rest.ValidateAllObjectFunc, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		got, err := getPod(ctx, t, storage, pod.Name)
		if err != nil || got.Spec.NodeName != "" {
			t.Errorf("after dry-run binding and eviction: %v, %v; want the pod unbound", got, err)
		}
	})

	t.Run("delete collection", func(t *testing.T) {
		collectionCtx := coretesting.Context(t, "collection")
		for _, name := range []string{"bound", "unbound"} {
			pod := newPod(name)
			pod.Namespace = "collection"
			created := createPod(collectionCtx, t, storage, pod)
			if name == "bound" {
				if err := bind(collectionCtx, storage, name, "node-a", created.UID); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := storage.Pod.DeleteCollection(collectionCtx, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}, &metainternalversion.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := getPod(collectionCtx, t, storage, "unbound"); !apierrors.IsNotFound(err) {
			t.Errorf("unbound pod: got %v, want not found", err)
		}
		if pod, err := getPod(collectionCtx, t, storage, "bound"); err != nil || pod.DeletionTimestamp == nil {
			t.Errorf("bound pod: got %v, %v; want it terminating", pod, err)
		}
	})

	t.Run("eviction", func(t *testing.T) {
		evict := func(name string, options *metav1.DeleteOptions) error {
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, DeleteOptions: options}
			_, err := storage.Eviction.Create(ctx, name, eviction, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
			return err
		}
		if err := evict("missing", nil); !apierrors.IsNotFound(err) {
			t.Errorf("evict missing pod: got %v, want not found", err)
		}
		createPod(ctx, t, storage, newPod("evict-unbound"))
		if err := evict("evict-unbound", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := getPod(ctx, t, storage, "evict-unbound"); !apierrors.IsNotFound(err) {
			t.Errorf("evicted unbound pod: got %v, want not found", err)
		}

		pod := createPod(ctx, t, storage, newPod("evict-bound"))
		if err := bind(ctx, storage, pod.Name, "node-a", ""); err != nil {
			t.Fatal(err)
		}
		if err := evict(pod.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}}); !apierrors.IsConflict(err) {
			t.Errorf("evict with wrong uid precondition: got %v, want conflict", err)
		}
		if err := evict(pod.Name, nil); err != nil {
			t.Fatal(err)
		}
		if terminating, err := getPod(ctx, t, storage, pod.Name); err != nil || terminating.DeletionTimestamp == nil {
			t.Errorf("evicted bound pod: got %v, %v; want it terminating", terminating, err)
		}
		if err := evict(pod.Name, metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := getPod(ctx, t, storage, pod.Name); !apierrors.IsNotFound(err) {
			t.Errorf("bound pod evicted with grace 0: got %v, want not found", err)
		}
	})
}

func TestPodFieldSelectors(t *testing.T) {
	storage := newTestStorage(t)
	ctx := coretesting.Context(t, testNamespace)

	for _, name := range []string{"on-a", "on-b", "unbound"} {
		pod := createPod(ctx, t, storage, newPod(name))
		if name != "unbound" {
			if err := bind(ctx, storage, name, "node-"+name[len(name)-1:], pod.UID); err != nil {
				t.Fatal(err)
			}
		}
	}
	running := createPod(ctx, t, storage, newPod("running"))
	running.Status.Phase = corev1.PodRunning
	if _, _, err := storage.Status.Update(ctx, running.Name, rest.DefaultUpdatedObjectInfo(running), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		selector        string
		resourceVersion string
		want            []string
	}{
		{selector: "spec.nodeName=node-a", want: []string{"on-a"}},
		// resourceVersion 0 is answered by the watch cache, through its index.
		{selector: "spec.nodeName=node-b", resourceVersion: "0", want: []string{"on-b"}},
		{selector: "spec.nodeName=", want: []string{"running", "unbound"}},
		{selector: "status.phase=Pending", want: []string{"on-a", "on-b", "unbound"}},
		{selector: "status.phase=Running,metadata.name=running", want: []string{"running"}},
		{selector: "spec.nodeName!=,status.phase=Pending", resourceVersion: "0", want: []string{"on-a", "on-b"}},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := storage.Pod.List(ctx, &metainternalversion.ListOptions{FieldSelector: selector, ResourceVersion: tc.resourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pod := range obj.(*corev1.PodList).Items {
				got = append(got, pod.Name)
			}
			if !equalStrings(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("watch spec.nodeName", func(t *testing.T) {
		list, err := storage.Pod.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := storage.Pod.Watch(ctx, &metainternalversion.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", "node-c"),
			ResourceVersion: list.(*corev1.PodList).ResourceVersion,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		createPod(ctx, t, storage, newPod("not-on-c"))
		pod := createPod(ctx, t, storage, newPod("on-c"))
		if err := bind(ctx, storage, pod.Name, "node-c", ""); err != nil {
			t.Fatal(err)
		}
		// The first event must be the pod entering the selection by binding;
		// the other pod never matches.
		select {
		case event := <-w.ResultChan():
			obj := event.Object
			if cacheable, isCacheable := obj.(runtime.CacheableObject); isCacheable {
				obj = cacheable.GetObject()
			}
			got, ok := obj.(*corev1.Pod)
			if event.Type != watch.Added || !ok || got.Name != "on-c" {
				t.Errorf("got %s %T %v, want ADDED on-c", event.Type, event.Object, event.Object)
			}
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatal("no watch event")
		}
	})
}

func hasCondition(pod *corev1.Pod, conditionType corev1.PodConditionType, status corev1.ConditionStatus) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == conditionType && c.Status == status {
			return true
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// assertInvalidField checks for a 422 whose causes name field.
func assertInvalidField(t *testing.T, err error, field string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error for %s", err, field)
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Fatalf("no details in %v", err)
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == field {
			return
		}
	}
	t.Errorf("no cause for field %s in %v", field, err)
}
