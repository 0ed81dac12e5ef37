package patcherrors

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/testing/apitest"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "pod-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-1"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

// patchContext is the context of a PATCH of pods/p as WithPatch leaves it.
func patchContext(t *testing.T, patchType types.PatchType, body string) context.Context {
	t.Helper()
	var ctx context.Context
	handler := WithPatch(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { ctx = req.Context() }), apitest.Scheme(corev1.AddToScheme), 1<<20)
	req := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/default/pods/p", strings.NewReader(body))
	req.Header.Set("Content-Type", string(patchType)+"; charset=utf-8")
	handler.ServeHTTP(httptest.NewRecorder(), req)
	if ctx == nil {
		t.Fatal("handler not called")
	}
	return request.WithRequestInfo(ctx, &request.RequestInfo{APIGroup: "", APIVersion: "v1", Resource: "pods", Name: "p", Verb: "patch"})
}

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		patchType types.PatchType
		patch     string
		// field is the one the 422 names; empty when the patch applies.
		field  string
		detail string
	}{
		{name: "entry without merge key", patchType: types.StrategicMergePatchType,
			patch: `{"metadata":{"ownerReferences":[{"uid":"owner-1"},{"name":"x"}]}}`, field: "metadata.ownerReferences[1]", detail: "does not contain declared merge key: uid"},
		{name: "container without name", patchType: types.StrategicMergePatchType,
			patch: `{"spec":{"containers":[{"image":"other"}]}}`, field: "spec.containers[0]", detail: "merge key: name"},
		{name: "entry that is not an object", patchType: types.StrategicMergePatchType,
			patch: `{"metadata":{"ownerReferences":["x"]}}`, field: "metadata.ownerReferences[0]", detail: "not identical"},
		{name: "unknown directive in an entry", patchType: types.StrategicMergePatchType,
			patch: `{"spec":{"containers":[{"name":"main","$patch":"explode"}]}}`, field: "spec.containers[0]", detail: "unknown patch type: explode"},
		{name: "unknown directive in an object", patchType: types.StrategicMergePatchType,
			patch: `{"spec":{"$patch":"explode"}}`, field: "spec.$patch", detail: "unknown patch type: explode"},
		{name: "element order that does not match", patchType: types.StrategicMergePatchType,
			patch: `{"spec":{"$setElementOrder/containers":[{"name":"other"}],"containers":[{"name":"main","image":"x"}]}}`, field: "spec.containers", detail: "doesn't match $setElementOrder list"},
		{name: "a good patch is not explained", patchType: types.StrategicMergePatchType,
			patch: `{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"main","image":"x"}]}}`},
		{name: "JSON patch at a missing index", patchType: types.JSONPatchType,
			patch: `[{"op":"add","path":"/metadata/labels","value":{}},{"op":"remove","path":"/spec/containers/3"}]`, field: "spec.containers[3]", detail: "remove operation #1"},
		{name: "JSON patch test that fails", patchType: types.JSONPatchType,
			patch: `[{"op":"test","path":"/metadata/owner~1References","value":1}]`, field: "metadata.owner/References"},
		{name: "a good JSON patch is not explained", patchType: types.JSONPatchType,
			patch: `[{"op":"replace","path":"/spec/containers/0/image","value":"x"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Explain(patchContext(t, tc.patchType, tc.patch), testPod())
			if tc.field == "" {
				if err != nil {
					t.Fatalf("explained a patch that applies: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want 422, got %v", err)
			}
			causes := err.(apierrors.APIStatus).Status().Details.Causes
			if len(causes) != 1 || causes[0].Field != tc.field {
				t.Errorf("causes %+v, want one naming %s", causes, tc.field)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("%v does not say %q", err, tc.detail)
			}
		})
	}
}

// failing is an updated-object function that fails with err.
type failing struct {
	rest.UpdatedObjectInfo
	err error
}

func (f failing) UpdatedObject(context.Context, runtime.Object) (runtime.Object, error) {
	return nil, f.err
}

func TestGuard(t *testing.T) {
	internal := errors.New("map: map[name:x] does not contain declared merge key: uid")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no"))
	badPatch := `{"metadata":{"ownerReferences":[{"name":"x"}]}}`
	goodPatch := `{"metadata":{"labels":{"a":"b"}}}`
	for _, tc := range []struct {
		name  string
		patch string // none: not a patch request
		err   error
		want  func(error) bool
	}{
		{"patch failure becomes 422", badPatch, internal, apierrors.IsInvalid},
		{"failure of a patch that applies is left alone", goodPatch, internal, func(err error) bool { return err == internal }},
		{"other API errors are left alone", badPatch, forbidden, apierrors.IsForbidden},
		{"updates without a patch are left alone", "", internal, func(err error) bool { return err == internal }},
		{"an apply that does not fit the schema becomes 400", "apply", errors.New("failed to create typed patch object (/p; /v1, Kind=Pod): .spec.sneaky: field not declared in schema"),
			func(err error) bool {
				return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), ".spec.sneaky")
			}},
		{"other apply failures are left alone", "apply", internal, func(err error) bool { return err == internal }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			switch tc.patch {
			case "":
			case "apply":
				ctx = patchContext(t, types.ApplyYAMLPatchType, "apiVersion: v1\nkind: Pod\n")
			default:
				ctx = patchContext(t, types.StrategicMergePatchType, tc.patch)
			}
			_, err := Guard(failing{err: tc.err}).UpdatedObject(ctx, testPod())
			if !tc.want(err) {
				t.Errorf("got %v", err)
			}
		})
	}
}

func TestWithPatchKeepsTheBody(t *testing.T) {
	for _, tc := range []struct {
		name        string
		method      string
		contentType string
		body        string
		kept        bool
	}{
		{"strategic merge", http.MethodPatch, "application/strategic-merge-patch+json", `{"a":1}`, true},
		{"JSON patch", http.MethodPatch, "application/json-patch+json", `[]`, true},
		{"merge patch is explained by the handler", http.MethodPatch, "application/merge-patch+json", `{"a":1}`, false},
		{"apply", http.MethodPatch, "application/apply-patch+yaml", `a: 1`, true},
		{"too big", http.MethodPatch, "application/json-patch+json", strings.Repeat(" ", 2048), false},
		{"not a patch", http.MethodPut, "application/json", `{}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			var kept bool
			handler := WithPatch(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				_, kept = req.Context().Value(contextKey{}).(*patchRequest)
				got, _ = io.ReadAll(req.Body)
			}), apitest.Scheme(corev1.AddToScheme), 1024)
			req := httptest.NewRequest(tc.method, "/api/v1/namespaces/default/pods/p", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			handler.ServeHTTP(httptest.NewRecorder(), req)
			if kept != tc.kept {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
			if string(got) != tc.body {
				t.Errorf("handler read %d bytes, want the whole body of %d", len(got), len(tc.body))
			}
		})
	}
}
