package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// httpDo sends one request as client and returns the status code and the
// answer.
func httpDo(t *testing.T, s *testServer, client *http.Client, method, path, contentType, body string) (int, string) {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var answer bytes.Buffer
	_, _ = answer.ReadFrom(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, answer.String()
}

// resourceVersionOf reads metadata.resourceVersion from a JSON object.
func resourceVersionOf(t *testing.T, object string) string {
	t.Helper()
	var o struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(object), &o); err != nil || o.Metadata.ResourceVersion == "" {
		t.Fatalf("no resourceVersion in %.500s: %v", object, err)
	}
	return o.Metadata.ResourceVersion
}

// TestMalformedPatchesNameTheField sends malformed strategic-merge, JSON
// and JSON merge patches to every kind and subresource that takes patches.
// Every object has an owner reference, so the merge-keyed list
// metadata.ownerReferences exists on all of them. Each patch must be
// answered 400 or 422 naming the field, never 500; nothing may change and
// the server stays healthy.
func TestMalformedPatchesNameTheField(t *testing.T) {
	s := sharedServer(t)
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	const owner = `"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"owner-1"}]`
	meta := func(name, namespace string) string {
		if namespace == "" {
			return fmt.Sprintf(`"metadata":{"name":%q,%s}`, name, owner)
		}
		return fmt.Sprintf(`"metadata":{"name":%q,"namespace":%q,%s}`, name, namespace, owner)
	}
	const resourceGroup = "/apis/resource.draplane.dev/v1"
	objects := []struct {
		collection string // where to create it
		name       string
		body       string
		// subresources that take patches
		subresources []string
	}{
		{resourceGroup + "/deviceclasses", "patch-class",
			`{"apiVersion":"resource.draplane.dev/v1","kind":"DeviceClass",` + meta("patch-class", "") + `,"spec":{}}`, nil},
		{resourceGroup + "/namespaces/default/resourceclaims", "patch-claim",
			`{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim",` + meta("patch-claim", "default") + `,"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}`,
			[]string{"status"}},
		{resourceGroup + "/namespaces/default/resourceclaimtemplates", "patch-template",
			`{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaimTemplate",` + meta("patch-template", "default") + `,"spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}}`, nil},
		{resourceGroup + "/resourceslices", "patch-slice",
			`{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceSlice",` + meta("patch-slice", "") + `,"spec":{"driver":"patch.example.com","nodeName":"patch-node","pool":{"name":"p","generation":1,"resourceSliceCount":1}}}`, nil},
		{resourceGroup + "/devicetaintrules", "patch-rule",
			`{"apiVersion":"resource.draplane.dev/v1","kind":"DeviceTaintRule",` + meta("patch-rule", "") + `,"spec":{"deviceSelector":{"driver":"patch.example.com"},"taint":{"key":"k","effect":"NoSchedule"}}}`,
			[]string{"status"}},
		{"/api/v1/namespaces/default/pods", "patch-pod",
			`{"apiVersion":"v1","kind":"Pod",` + meta("patch-pod", "default") + `,"spec":{"containers":[{"name":"main","image":"busybox"}]}}`,
			[]string{"status"}},
		{"/api/v1/nodes", "patch-node",
			`{"apiVersion":"v1","kind":"Node",` + meta("patch-node", "") + `}`, []string{"status"}},
		{"/api/v1/namespaces", "patch-namespace",
			`{"apiVersion":"v1","kind":"Namespace",` + meta("patch-namespace", "") + `}`, []string{"status"}},
		{"/api/v1/namespaces/default/events", "patch-event",
			`{"apiVersion":"v1","kind":"Event",` + meta("patch-event", "default") + `,"involvedObject":{"kind":"Pod","name":"patch-pod","namespace":"default"},"reason":"Test","message":"test","type":"Normal"}`, nil},
		{"/apis/coordination.k8s.io/v1/namespaces/default/leases", "patch-lease",
			`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease",` + meta("patch-lease", "default") + `,"spec":{}}`, nil},
	}
	const (
		strategic = "application/strategic-merge-patch+json"
		jsonPatch = "application/json-patch+json"
		merge     = "application/merge-patch+json"
	)
	patches := []struct {
		name        string
		contentType string
		body        string
		// field must appear in the answer.
		field string
	}{
		{"entry without merge key", strategic, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"other"}]}}`, "metadata.ownerReferences[0]"},
		{"entry that is not an object", strategic, `{"metadata":{"ownerReferences":[1,2]}}`, "metadata.ownerReferences[0]"},
		{"unknown $patch directive in an entry", strategic, `{"metadata":{"ownerReferences":[{"$patch":"bogus","uid":"owner-1"}]}}`, "metadata.ownerReferences[0]"},
		{"unknown $patch directive in an object", strategic, `{"metadata":{"$patch":"bogus"}}`, "metadata.$patch"},
		{"$setElementOrder that does not match", strategic, `{"metadata":{"$setElementOrder/ownerReferences":[{"uid":"elsewhere"}],"ownerReferences":[{"uid":"owner-1","name":"renamed"}]}}`, "metadata.ownerReferences"},
		{"$setElementOrder of scalars", strategic, `{"metadata":{"$setElementOrder/ownerReferences":[1],"ownerReferences":[{"uid":"owner-1"}]}}`, "metadata.ownerReferences"},
		{"JSON patch removing a missing entry", jsonPatch, `[{"op":"remove","path":"/metadata/ownerReferences/5"}]`, "metadata.ownerReferences[5]"},
		{"JSON patch test that fails", jsonPatch, `[{"op":"test","path":"/metadata/ownerReferences/0/uid","value":"someone-else"}]`, "metadata.ownerReferences[0].uid"},
		{"JSON patch adding an entry that is not an object", jsonPatch, `[{"op":"add","path":"/metadata/ownerReferences/-","value":1}]`, "ownerReferences"},
		{"JSON merge patch with an entry that is not an object", merge, `{"metadata":{"ownerReferences":[1]}}`, "ownerReferences"},
	}

	for _, o := range objects {
		if code, answer := httpDo(t, s, admin, "POST", o.collection, "application/json", o.body); code != http.StatusCreated {
			t.Fatalf("create %s: %d %.1000s", o.name, code, answer)
		}
		path := o.collection + "/" + o.name
		code, answer := httpDo(t, s, admin, "GET", path, "", "")
		if code != http.StatusOK {
			t.Fatalf("get %s: %d %.1000s", path, code, answer)
		}
		before := resourceVersionOf(t, answer)
		for _, sub := range append([]string{""}, o.subresources...) {
			target := path
			if sub != "" {
				target += "/" + sub
			}
			for _, p := range patches {
				t.Run(strings.TrimPrefix(target, "/")+"/"+p.name, func(t *testing.T) {
					code, answer := httpDo(t, s, admin, "PATCH", target, p.contentType, p.body)
					if code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
						t.Errorf("status %d, want 400 or 422: %.1000s", code, answer)
					}
					if !strings.Contains(answer, p.field) {
						t.Errorf("answer does not name %s: %.1000s", p.field, answer)
					}
					healthy(t, s, anonymous)
				})
			}
		}
		if code, answer := httpDo(t, s, admin, "GET", path, "", ""); code != http.StatusOK || resourceVersionOf(t, answer) != before {
			t.Errorf("%s changed by refused patches: %d %.1000s", path, code, answer)
		}
	}

	// The claim status of the report: reservedFor is keyed by uid. Through
	// kubectl, in both served versions.
	claim := resourceGroup + "/namespaces/default/resourceclaims/patch-claim/status"
	if code, answer := httpDo(t, s, admin, "PATCH", claim, merge,
		`{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"p","device":"d0"}]}},"reservedFor":[{"resource":"pods","name":"a","uid":"u1"}]}}`); code != http.StatusOK {
		t.Fatalf("allocate patch-claim: %d %.1000s", code, answer)
	}
	for _, version := range []string{"resourceclaims.v1.resource.draplane.dev", "resourceclaims.v1beta1.resource.draplane.dev"} {
		for _, p := range []struct{ patch, field string }{
			{`{"status":{"reservedFor":[{"resource":"pods","name":"b"}]}}`, "status.reservedFor[0]"},
			{`{"status":{"reservedFor":[1,2]}}`, "status.reservedFor[0]"},
			{`{"status":{"reservedFor":[{"$patch":"bogus","uid":"u1"}]}}`, "status.reservedFor[0]"},
			{`{"status":{"$setElementOrder/reservedFor":[{"uid":"u9"}],"reservedFor":[{"uid":"u1","name":"b"}]}}`, "status.reservedFor"},
		} {
			out, err := s.Kubectl(t, "", "patch", version, "patch-claim", "-n", "default", "--subresource=status", "--type=strategic", "-p", p.patch)
			if err == nil || !strings.Contains(out, "is invalid") || !strings.Contains(out, p.field) {
				t.Errorf("kubectl patch %s %s: want invalid naming %s: %v\n%s", version, p.patch, p.field, err, out)
			}
		}
	}
	out := s.MustKubectl(t, "", "get", "resourceclaim", "patch-claim", "-n", "default", "-o", "jsonpath={.status.reservedFor[*].uid}")
	if out != "u1" {
		t.Errorf("reservedFor after refused patches: %q, want u1", out)
	}
	healthy(t, s, anonymous)
}
