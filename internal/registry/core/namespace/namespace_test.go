package namespace

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

func TestStrategy(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	Strategy.PrepareForCreate(ctx, ns)
	if ns.Status.Phase != corev1.NamespaceActive || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) || ns.Labels[corev1.LabelMetadataName] != "team-a" {
		t.Errorf("after PrepareForCreate: %+v", ns)
	}

	for _, tc := range []struct {
		name    string
		ns      corev1.Namespace
		wantErr bool
	}{
		{name: "valid", ns: corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ok"}}},
		{name: "subdomain is not a valid namespace name", ns: corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, wantErr: true},
		{name: "qualified finalizer", ns: corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ok"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/cleanup"}}}},
		{name: "unqualified finalizer", ns: corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ok"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"cleanup"}}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Strategy.Validate(ctx, &tc.ns)
			if (len(errs) > 0) != tc.wantErr {
				t.Errorf("errors %v, want errors: %v", errs, tc.wantErr)
			}
		})
	}

	old := ns.DeepCopy()
	old.ResourceVersion = "1"
	updated := old.DeepCopy()
	updated.Spec.Finalizers = nil
	updated.Status.Phase = corev1.NamespaceTerminating
	Strategy.PrepareForUpdate(ctx, updated, old)
	if len(updated.Spec.Finalizers) != 1 || updated.Status.Phase != corev1.NamespaceActive {
		t.Errorf("a spec update changed finalizers or status: %+v", updated)
	}
	finalized := old.DeepCopy()
	finalized.Spec.Finalizers = nil
	finalized.Labels = map[string]string{"sneaky": "label"}
	FinalizeStrategy.PrepareForUpdate(ctx, finalized, old)
	if len(finalized.Spec.Finalizers) != 0 || finalized.Labels["sneaky"] != "" {
		t.Errorf("finalize must change only the finalizers: %+v", finalized)
	}
	statusUpdate := old.DeepCopy()
	statusUpdate.Status.Phase = corev1.NamespaceTerminating
	StatusStrategy.PrepareForUpdate(ctx, statusUpdate, old)
	if errs := StatusStrategy.ValidateUpdate(ctx, statusUpdate, old); len(errs) == 0 {
		t.Error("Terminating without deletionTimestamp accepted")
	}
}

func TestStorageDeleteAndFinalize(t *testing.T) {
	storage, err := NewStorage(coretesting.NewRESTOptionsGetter(t))
	if err != nil {
		t.Fatal(err)
	}
	coretesting.Ready(t, storage.Namespace.Store.Store)
	ctx := coretesting.Context(t, "")

	get := func(name string) (*corev1.Namespace, error) {
		obj, err := storage.Namespace.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Namespace), nil
	}
	obj, err := storage.Namespace.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*corev1.Namespace)
	if !slices.Contains(created.Spec.Finalizers, corev1.FinalizerKubernetes) || created.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("created namespace %+v", created)
	}

	wrongUID := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}}
	if _, _, err := storage.Namespace.Delete(ctx, "doomed", rest.ValidateAllObjectFunc, wrongUID); !apierrors.IsConflict(err) {
		t.Errorf("delete with wrong uid: got %v, want conflict", err)
	}
	for i := range 2 {
		_, deleted, err := storage.Namespace.Delete(ctx, "doomed", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
		if err != nil || deleted {
			t.Fatalf("delete #%d: deleted=%v err=%v; want kept", i+1, deleted, err)
		}
		ns, err := get("doomed")
		if err != nil {
			t.Fatal(err)
		}
		if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("after delete #%d: deletionTimestamp %v phase %q; want set and Terminating", i+1, ns.DeletionTimestamp, ns.Status.Phase)
		}
	}

	ns, err := get("doomed")
	if err != nil {
		t.Fatal(err)
	}
	ns.Spec.Finalizers = nil
	if _, _, err := storage.Finalize.Update(ctx, ns.Name, rest.DefaultUpdatedObjectInfo(ns), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if _, err := get("doomed"); !apierrors.IsNotFound(err) {
		t.Errorf("finalized terminating namespace: got %v, want not found", err)
	}

	// Removing the finalizer of a live namespace does not delete it; deleting
	// it afterwards does, at once.
	obj, err = storage.Namespace.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain := obj.(*corev1.Namespace)
	plain.Spec.Finalizers = nil
	if _, _, err := storage.Finalize.Update(ctx, plain.Name, rest.DefaultUpdatedObjectInfo(plain), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := get("plain"); err != nil {
		t.Fatalf("live namespace without finalizers: %v", err)
	}
	if _, deleted, err := storage.Namespace.Delete(ctx, "plain", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil || !deleted {
		t.Errorf("delete namespace without finalizers: deleted=%v err=%v", deleted, err)
	}
	if _, err := get("plain"); !apierrors.IsNotFound(err) {
		t.Errorf("got %v, want not found", err)
	}
}
