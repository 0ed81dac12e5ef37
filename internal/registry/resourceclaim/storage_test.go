package resourceclaim

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

func newTestREST(t *testing.T) (*REST, *StatusREST) {
	t.Helper()
	scheme := apitest.Scheme()
	storage, status, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion), AdminAccess{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	return storage, status
}

func update(ctx context.Context, updater rest.Updater, obj *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	out, _, err := updater.Update(ctx, obj.Name, rest.DefaultUpdatedObjectInfo(obj), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return out.(*resourceapi.ResourceClaim), nil
}

func TestStorageStatusSubresource(t *testing.T) {
	storage, status := newTestREST(t)
	ctx := genericapirequest.WithNamespace(context.Background(), "default")

	claim := testClaim(allocated("gpu-0"))
	claim.ResourceVersion = ""
	obj, err := storage.Create(ctx, claim, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*resourceapi.ResourceClaim)
	if created.Status.Allocation != nil {
		t.Fatalf("create stored the status: %+v", created.Status)
	}

	withAllocation := created.DeepCopy()
	allocated("gpu-0")(withAllocation)
	written, err := update(ctx, status, withAllocation)
	if err != nil {
		t.Fatalf("status update: %v", err)
	}
	if written.Status.Allocation == nil {
		t.Fatal("status update lost the allocation")
	}

	// The main resource neither changes the status nor the spec.
	cleared := written.DeepCopy()
	cleared.Status = resourceapi.ResourceClaimStatus{}
	cleared.Labels = map[string]string{"a": "b"}
	afterLabel, err := update(ctx, storage, cleared)
	if err != nil {
		t.Fatalf("label update: %v", err)
	}
	if afterLabel.Status.Allocation == nil {
		t.Error("update of the main resource cleared the status")
	}
	respec := afterLabel.DeepCopy()
	respec.Spec.Devices.Requests[0].Name = "renamed"
	if _, err := update(ctx, storage, respec); !apierrors.IsInvalid(err) {
		t.Errorf("spec update: got %v, want Invalid", err)
	}

	list, err := storage.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := storage.ConvertToTable(ctx, list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[1] != "allocated" || table.Rows[0].Cells[2] != "gpu.example.com" {
		t.Errorf("table rows %+v", table.Rows)
	}
	if got, err := status.Get(ctx, "claim", &metav1.GetOptions{}); err != nil || got.(*resourceapi.ResourceClaim).Status.Allocation == nil {
		t.Errorf("status get: %v", err)
	}
	if got := storage.ShortNames(); len(got) != 1 || got[0] != "rcl" {
		t.Errorf("short names %v", got)
	}
}
