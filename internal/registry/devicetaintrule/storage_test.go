package devicetaintrule

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

func TestStorageStatusSubresource(t *testing.T) {
	scheme := apitest.Scheme()
	storage, status, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	ctx := genericapirequest.WithNamespace(context.Background(), "")

	rule := testRule(withCondition, func(r *resourceapi.DeviceTaintRule) { r.ResourceVersion = ""; r.Spec.Taint.TimeAdded = nil })
	obj, err := storage.Create(ctx, rule, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*resourceapi.DeviceTaintRule)
	if created.Spec.Taint.TimeAdded == nil || len(created.Status.Conditions) != 0 {
		t.Fatalf("created rule: timeAdded %v, status %+v", created.Spec.Taint.TimeAdded, created.Status)
	}

	withStatus := created.DeepCopy()
	withCondition(withStatus)
	withStatus.Spec.Taint.Key = "example.com/through-status"
	obj, _, err = status.Update(ctx, "rule", rest.DefaultUpdatedObjectInfo(withStatus), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status update: %v", err)
	}
	written := obj.(*resourceapi.DeviceTaintRule)
	if len(written.Status.Conditions) != 1 || written.Spec.Taint.Key != "example.com/broken" {
		t.Errorf("after status update: key %q, status %+v", written.Spec.Taint.Key, written.Status)
	}

	table, err := storage.ConvertToTable(ctx, written, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cells := table.Rows[0].Cells; cells[1] != "NoSchedule" || cells[3] != "gpu.example.com/*/*" {
		t.Errorf("table row %v", cells)
	}
}
