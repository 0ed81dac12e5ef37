package resourceclaim

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

// TestStatusNodeRestriction: the status store runs the node restriction's
// check of updates (the admission chain no longer sees updates): a node
// may change status.devices of a claim and nothing else of its status,
// refused with admission's 403 naming the group the request used, dry run
// or not; the main resource and identities that are not nodes are not
// checked.
func TestStatusNodeRestriction(t *testing.T) {
	scheme := apitest.Scheme()
	check := node.NewAdmission().UpdateCheck(resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), "status")
	storage, status, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion), AdminAccess{}, check)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	admin := genericapirequest.WithNamespace(context.Background(), "default")
	claim := testClaim()
	claim.ResourceVersion = ""
	if _, err := storage.Create(admin, claim, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	current := func() *resourceapi.ResourceClaim {
		t.Helper()
		obj, err := status.Get(admin, "claim", &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*resourceapi.ResourceClaim)
	}
	if _, err := update(admin, status, testClaim(allocated("gpu-0", "gpu-1"), func(c *resourceapi.ResourceClaim) { c.ResourceVersion = current().ResourceVersion })); err != nil {
		t.Fatalf("admin allocating: %v", err)
	}
	nodeA := &user.DefaultInfo{Name: "draplane:node:a", Groups: []string{"draplane:nodes", "draplane:driver:gpu.example.com"}}
	for i, group := range []string{"resource.draplane.dev", "resource.k8s.io"} {
		ctx := genericapirequest.WithUser(genericapirequest.WithRequestInfo(admin, &genericapirequest.RequestInfo{
			IsResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: "resourceclaims", Subresource: "status", Namespace: "default", Name: "claim",
		}), nodeA)
		withDevices := current()
		withDevices.Status.Devices = nil
		withDeviceStatus(fmt.Sprintf("gpu-%d", i))(withDevices)
		if _, err := update(ctx, status, withDevices); err != nil {
			t.Errorf("%s: node writing status.devices: %v", group, err)
		}
		want := `resourceclaims.` + group + ` "claim" is forbidden: node restriction: draplane:node:a may only change status.devices of claim default/claim`
		for _, dryRun := range [][]string{nil, {metav1.DryRunAll}} {
			withReservation := current()
			reserved(withReservation)
			_, _, err := status.Update(ctx, "claim", rest.DefaultUpdatedObjectInfo(withReservation), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{DryRun: dryRun})
			if !apierrors.IsForbidden(err) || err.Error() != want {
				t.Errorf("%s, dry run %v: node writing status.reservedFor: %v, want 403 %q", group, dryRun, err, want)
			}
		}
		labeled := current()
		labeled.Labels = map[string]string{"group": group}
		if _, err := update(ctx, storage, labeled); err != nil {
			t.Errorf("%s: a node's update of the main resource: %v (the restriction is the authorizer's there)", group, err)
		}
	}
	withReservation := current()
	reserved(withReservation)
	if _, err := update(admin, status, withReservation); err != nil {
		t.Errorf("admin reserving the claim: %v", err)
	}
}
