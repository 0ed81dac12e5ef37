package resourceslice

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestStorageRefusesHugeQuantities: a capacity of 1e999999999 is refused
// with a 422 naming it, on create and on update, through the real store;
// before, comparing it (the update's generation check, the request
// policy's checks) made the request run for minutes.
func TestStorageRefusesHugeQuantities(t *testing.T) {
	storage := newTestREST(t)
	ctx := genericapirequest.WithNamespace(context.Background(), "")
	huge := resource.MustParse("1e999999999")
	withCapacity := func(s *resourceapi.ResourceSlice, q resource.Quantity) *resourceapi.ResourceSlice {
		s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
		s.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"cores": {Value: q, RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: &q, ValidValues: []resource.Quantity{q}}}}
		return s
	}
	const field = "spec.devices[0].capacity[cores].value"

	_, err := storage.Create(ctx, withCapacity(newSlice("a", "node-1", "one.example.com", "pool-a"), huge), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	assertInvalidAt(t, err, field)

	obj, err := storage.Create(ctx, withCapacity(newSlice("b", "node-1", "one.example.com", "pool-b"), resource.MustParse("8")), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := withCapacity(obj.(*resourceapi.ResourceSlice).DeepCopy(), huge)
	_, _, err = storage.Update(ctx, "b", rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	assertInvalidAt(t, err, field)
}

func assertInvalidAt(t *testing.T, err error, field string) {
	t.Helper()
	status, ok := err.(apierrors.APIStatus)
	if !ok || !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == field {
			return
		}
	}
	t.Errorf("422 does not name %s: %v", field, err)
}
