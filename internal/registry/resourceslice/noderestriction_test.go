package resourceslice

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

// TestUpdateNodeRestriction: the store runs the node restriction's check
// of updates (the admission chain no longer sees updates): a node may
// update only slices of its node and its drivers (spec.nodeName and
// spec.driver are immutable: validation refuses changing them first),
// refused with admission's 403 naming the group the request used,
// whether the update is an update, a patch (an update of the stored
// object through transformers) or a dry run. Identities that are not
// nodes are not checked.
func TestUpdateNodeRestriction(t *testing.T) {
	scheme := apitest.Scheme()
	check := node.NewAdmission().UpdateCheck(resourcev1.SchemeGroupVersion.WithResource("resourceslices"), "")
	storage, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion), check)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	admin := genericapirequest.WithNamespace(context.Background(), "")
	for _, s := range []*resourceapi.ResourceSlice{newSlice("a-gpu", "a", "gpu.example.com", "a"), newSlice("b-gpu", "b", "gpu.example.com", "b"), newSlice("a-nic", "a", "nic.example.com", "a-nic")} {
		if _, err := storage.Create(admin, s, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeA := &user.DefaultInfo{Name: "draplane:node:a", Groups: []string{"draplane:nodes", "draplane:driver:gpu.example.com"}}
	label := func(_ context.Context, _, obj runtime.Object) (runtime.Object, error) {
		s := obj.DeepCopyObject().(*resourceapi.ResourceSlice)
		s.Labels = map[string]string{"by": "a"}
		return s, nil
	}
	for _, group := range []string{"resource.draplane.dev", "resource.k8s.io"} {
		ctx := genericapirequest.WithUser(genericapirequest.WithRequestInfo(admin, &genericapirequest.RequestInfo{
			IsResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: "resourceslices",
		}), nodeA)
		for _, tc := range []struct {
			name, slice string
			transform   rest.TransformFunc
			dryRun      []string
			want        string
		}{
			{name: "own slice", slice: "a-gpu", transform: label},
			{name: "another node's slice", slice: "b-gpu", transform: label,
				want: `resourceslices.` + group + ` "b-gpu" is forbidden: node restriction: draplane:node:a may only write ResourceSlices with spec.nodeName a; slice b-gpu has "b"`},
			{name: "another node's slice, dry run", slice: "b-gpu", transform: label, dryRun: []string{metav1.DryRunAll},
				want: `resourceslices.` + group + ` "b-gpu" is forbidden: node restriction: draplane:node:a may only write ResourceSlices with spec.nodeName a; slice b-gpu has "b"`},
			{name: "a driver it lacks", slice: "a-nic", transform: label,
				want: `resourceslices.` + group + ` "a-nic" is forbidden: node restriction: draplane:node:a may not publish ResourceSlices of driver nic.example.com: it lacks the group draplane:driver:nic.example.com`},
		} {
			t.Run(group+"/"+tc.name, func(t *testing.T) {
				// As the PATCH handler: the new object is made from the
				// stored one.
				objInfo := rest.DefaultUpdatedObjectInfo(nil, tc.transform)
				_, _, err := storage.Update(ctx, tc.slice, objInfo, rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{DryRun: tc.dryRun})
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("update: %v", err)
				case tc.want != "" && (!apierrors.IsForbidden(err) || err.Error() != tc.want):
					t.Errorf("update: %v, want 403 %q", err, tc.want)
				}
			})
		}
	}
	if _, _, err := storage.Update(admin, "b-gpu", rest.DefaultUpdatedObjectInfo(nil, label), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
		t.Errorf("admin updating node b's slice: %v", err)
	}
}
