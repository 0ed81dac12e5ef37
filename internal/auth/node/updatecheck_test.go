package node

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestAdmissionHandles: the admission chain asks the plugin about creates
// and deletes only. A plugin that handles updates makes the API handlers
// decode the managedFields of every update again after mutating admission
// (BenchmarkUpdateAdmission); the stores run UpdateCheck instead.
func TestAdmissionHandles(t *testing.T) {
	p := NewAdmission()
	for op, want := range map[admission.Operation]bool{admission.Create: true, admission.Delete: true, admission.Update: false, admission.Connect: false} {
		if got := p.Handles(op); got != want {
			t.Errorf("Handles(%s) = %v, want %v", op, got, want)
		}
	}
}

// TestUpdateCheck: the check the stores run on updates is Validate's, with
// the 403 naming the group of the request, or the store's resource when
// the request names no group of the plugin's.
func TestUpdateCheck(t *testing.T) {
	const sa = "system:serviceaccount:dra:gpu-driver"
	p := NewAdmission()
	p.DriverServiceAccounts = map[string][]string{sa: {"gpu.example.com"}}
	check := p.UpdateCheck(resourcev1.SchemeGroupVersion.WithResource("resourceslices"), "")
	slice := func(node string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To(node), Driver: "gpu.example.com"}}
	}
	info := func(group string) *request.RequestInfo {
		return &request.RequestInfo{IsResourceRequest: true, APIGroup: group, APIVersion: "v1", Resource: "resourceslices", Name: "s"}
	}
	for _, tc := range []struct {
		name     string
		user     user.Info
		info     *request.RequestInfo
		obj, old *resourceapi.ResourceSlice
		want     string
	}{
		{name: "own slice", user: nodeA, info: info("resource.k8s.io"), obj: slice("a"), old: slice("a")},
		{name: "another node's slice, upstream group", user: nodeA, info: info("resource.k8s.io"), obj: slice("b"), old: slice("b"),
			want: `resourceslices.resource.k8s.io "s" is forbidden: node restriction: draplane:node:a may only write ResourceSlices with spec.nodeName a; slice s has "b"`},
		{name: "another node's slice, draplane group", user: nodeA, info: info("resource.draplane.dev"), obj: slice("b"), old: slice("b"),
			want: `resourceslices.resource.draplane.dev "s" is forbidden: node restriction: draplane:node:a may only write ResourceSlices with spec.nodeName a; slice s has "b"`},
		{name: "the stored object is checked too", user: nodeA, obj: slice("a"), old: slice("b"),
			want: `resourceslices.resource.draplane.dev "s" is forbidden: node restriction: draplane:node:a may only write ResourceSlices with spec.nodeName a; slice s has "b"`},
		{name: "a request of another group does not lift the check", user: nodeA, info: info("example.com"), obj: slice("b"), old: slice("b"),
			want: `resourceslices.resource.draplane.dev "s" is forbidden: node restriction: draplane:node:a may only write ResourceSlices with spec.nodeName a; slice s has "b"`},
		{name: "service account's token without a node", user: &user.DefaultInfo{Name: sa}, info: info("resource.draplane.dev"), obj: slice("a"), old: slice("a"),
			want: "names no node"},
		{name: "not node-bound", user: &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}, obj: slice("b"), old: slice("b")},
		{name: "no user", obj: slice("b"), old: slice("b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.user != nil {
				ctx = request.WithUser(ctx, tc.user)
			}
			if tc.info != nil {
				ctx = request.WithRequestInfo(ctx, tc.info)
			}
			err := check(ctx, tc.obj, tc.old)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want 403 with %q", err, tc.want)
			}
		})
	}
}
