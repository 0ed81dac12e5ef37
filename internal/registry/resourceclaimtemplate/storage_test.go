package resourceclaimtemplate

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/registry/resourceclaim"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

func TestStorageRefusesSpecChanges(t *testing.T) {
	scheme := apitest.Scheme()
	storage, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion), resourceclaim.AdminAccess{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	ctx := genericapirequest.WithNamespace(context.Background(), "default")

	obj, err := storage.Create(ctx, testTemplate(func(tt *resourceapi.ResourceClaimTemplate) { tt.ResourceVersion = "" }), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := obj.(*resourceapi.ResourceClaimTemplate).DeepCopy()
	changed.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
	_, _, err = storage.Update(ctx, changed.Name, rest.DefaultUpdatedObjectInfo(changed), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("spec update: got %v, want Invalid", err)
	}
	if got := storage.ShortNames(); len(got) != 1 || got[0] != "rct" {
		t.Errorf("short names %v", got)
	}
}
