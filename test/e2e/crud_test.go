package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// kindCase is one kind driven through its whole life with kubectl.
type kindCase struct {
	resource  string
	namespace string
	name      string
	// manifest is the object as a user writes it.
	manifest string
	// columns must appear in the header of `kubectl get`.
	columns []string
}

func kindCases() []kindCase {
	return []kindCase{
		{
			resource: "deviceclasses", name: "crud-class",
			manifest: `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: crud-class
spec: {}
`,
			columns: []string{"NAME", "SELECTORS", "AGE"},
		},
		{
			resource: "resourceslices", name: "crud-slice",
			manifest: `apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: crud-slice
spec:
  driver: crud.example.com
  nodeName: crud-node
  pool:
    name: crud-pool
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: dev-0
  - name: dev-1
`,
			columns: []string{"NAME", "NODE", "DRIVER", "POOL", "DEVICES", "AGE"},
		},
		{
			resource: "resourceclaimtemplates", namespace: "default", name: "crud-template",
			manifest: `apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: crud-template
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: req
        exactly:
          deviceClassName: crud-class
          # As defaulted: requests is an atomic list, so server-side apply
          # of the same manifest conflicts unless it matches the stored
          # (defaulted) value.
          allocationMode: ExactCount
          count: 1
`,
			columns: []string{"NAME", "CLASS", "AGE"},
		},
		{
			resource: "resourceclaims", namespace: "default", name: "crud-claim",
			manifest: `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: crud-claim
  namespace: default
spec:
  devices:
    requests:
    - name: req
      exactly:
        deviceClassName: crud-class
        allocationMode: ExactCount
        count: 1
`,
			columns: []string{"NAME", "STATE", "CLASS", "AGE"},
		},
		{
			resource: "devicetaintrules", name: "crud-rule",
			manifest: `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: crud-rule
spec:
  deviceSelector:
    driver: crud.example.com
    pool: crud-pool
  taint:
    key: example.com/maintenance
    value: planned
    effect: NoSchedule
`,
			columns: []string{"NAME", "EFFECT", "SELECTOR", "AGE"},
		},
	}
}

// TestKubectlLifecycleEveryKind creates, reads, lists, watches, patches,
// applies server-side and deletes one object of every kind.
func TestKubectlLifecycleEveryKind(t *testing.T) {
	s := sharedServer(t)
	dyn, err := dynamic.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range kindCases() {
		t.Run(tc.resource, func(t *testing.T) {
			nsArgs := []string{}
			if tc.namespace != "" {
				nsArgs = []string{"-n", tc.namespace}
			}
			gvr := schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: tc.resource}
			ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
			defer cancel()
			w, err := dyn.Resource(gvr).Namespace(tc.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + tc.name})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer w.Stop()

			s.MustKubectl(t, tc.manifest, "create", "-f", "-")
			expectEvent(t, w, watch.Added, tc.name)

			got := s.MustKubectl(t, "", append([]string{"get", tc.resource, tc.name, "-o", "jsonpath={.metadata.name}/{.metadata.generation}"}, nsArgs...)...)
			if got != tc.name+"/1" {
				t.Errorf("get: got %q, want %q", got, tc.name+"/1")
			}

			table := s.MustKubectl(t, "", append([]string{"get", tc.resource}, nsArgs...)...)
			header, _, _ := strings.Cut(table, "\n")
			for _, column := range tc.columns {
				if !strings.Contains(header, column) {
					t.Errorf("kubectl get %s: header %q lacks column %s", tc.resource, header, column)
				}
			}
			if !strings.Contains(table, tc.name) {
				t.Errorf("kubectl get %s does not list %s:\n%s", tc.resource, tc.name, table)
			}

			s.MustKubectl(t, "", append([]string{"patch", tc.resource, tc.name, "--type=merge", "-p", `{"metadata":{"labels":{"e2e":"patched"}}}`}, nsArgs...)...)
			expectEvent(t, w, watch.Modified, tc.name)
			if got := s.MustKubectl(t, "", append([]string{"get", tc.resource, tc.name, "-o", "jsonpath={.metadata.labels.e2e}"}, nsArgs...)...); got != "patched" {
				t.Errorf("after patch: label e2e=%q, want patched", got)
			}

			applied := strings.Replace(tc.manifest, "metadata:\n", "metadata:\n  annotations:\n    e2e/applied: \"yes\"\n", 1)
			s.MustKubectl(t, applied, "apply", "--server-side", "--field-manager=e2e-apply", "-f", "-")
			out := s.MustKubectl(t, "", append([]string{"get", tc.resource, tc.name, "-o", "json", "--show-managed-fields"}, nsArgs...)...)
			var object struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(out), &object); err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			if object.Metadata.Annotations["e2e/applied"] != "yes" {
				t.Errorf("server-side apply did not set the annotation: %v", object.Metadata.Annotations)
			}
			if !hasManager(object.Metadata.ManagedFields, "e2e-apply", metav1.ManagedFieldsOperationApply) {
				t.Errorf("managedFields lack an Apply entry of e2e-apply: %+v", object.Metadata.ManagedFields)
			}

			s.MustKubectl(t, "", append([]string{"delete", tc.resource, tc.name, "--wait=true"}, nsArgs...)...)
			expectEvent(t, w, watch.Deleted, tc.name)
			if out, err := s.Kubectl(t, "", append([]string{"get", tc.resource, tc.name}, nsArgs...)...); err == nil || !strings.Contains(out, "NotFound") {
				t.Errorf("after delete: get returned %v: %s", err, out)
			}
		})
	}
}

func hasManager(entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) bool {
	for _, entry := range entries {
		if entry.Manager == manager && entry.Operation == op {
			return true
		}
	}
	return false
}

// expectEvent waits for the next event about name of the given type,
// skipping others (a patch and an apply may merge into one MODIFIED).
func expectEvent(t *testing.T, w watch.Interface, want watch.EventType, name string) {
	t.Helper()
	deadline := time.After(pollTimeout)
	for {
		select {
		case event, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed while waiting for %s of %s", want, name)
			}
			object, isObject := event.Object.(*unstructured.Unstructured)
			if event.Type == want && isObject && object.GetName() == name {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event for %s within %v", want, name, pollTimeout)
		}
	}
}

// TestCategoryAndShortNames: `kubectl get dra` lists every kind through the
// category, and short names resolve.
func TestCategoryAndShortNames(t *testing.T) {
	s := sharedServer(t)
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: category-class
spec: {}
`, "create", "-f", "-")
	t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "deviceclass", "category-class") })
	if out := s.MustKubectl(t, "", "get", "dra", "-A"); !strings.Contains(out, "deviceclass.resource.draplane.dev/category-class") {
		t.Errorf("kubectl get dra -A does not show the class:\n%s", out)
	}
	for _, short := range []string{"dvc", "rcl", "rct", "rsl", "dtr"} {
		if _, err := s.Kubectl(t, "", "get", short, "-A"); err != nil {
			t.Errorf("short name %s: %v", short, err)
		}
	}
}

// TestExplain: the OpenAPI models reach kubectl explain.
func TestExplain(t *testing.T) {
	s := sharedServer(t)
	for _, tc := range []struct {
		field string
		want  []string
	}{
		{"resourceclaims.spec.devices.requests.exactly", []string{"deviceClassName", "allocationMode", "selectors"}},
		{"resourceslices.spec.pool", []string{"generation", "resourceSliceCount"}},
		{"devicetaintrules.spec.taint", []string{"effect", "timeAdded"}},
		{"deviceclasses.spec", []string{"selectors"}},
		{"resourceclaimtemplates.spec.spec", []string{"devices"}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			out := s.MustKubectl(t, "", "explain", tc.field)
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("kubectl explain %s lacks %q:\n%s", tc.field, want, out)
				}
			}
		})
	}
}

// TestFieldSelectorsOnSlices: spec.nodeName, spec.driver and spec.pool.name.
func TestFieldSelectorsOnSlices(t *testing.T) {
	s := sharedServer(t)
	slices := []struct{ name, node, driver, pool string }{
		{"fs-a", "fs-node-1", "fs-one.example.com", "fs-pool-a"},
		{"fs-b", "fs-node-2", "fs-one.example.com", "fs-pool-b"},
		{"fs-c", "fs-node-2", "fs-two.example.com", "fs-pool-c"},
	}
	for _, slice := range slices {
		s.MustKubectl(t, fmt.Sprintf(`apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: %s
spec:
  driver: %s
  nodeName: %s
  pool: {name: %s, generation: 1, resourceSliceCount: 1}
  devices: [{name: dev-0}]
`, slice.name, slice.driver, slice.node, slice.pool), "create", "-f", "-")
		t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "resourceslice", slice.name) })
	}
	for _, tc := range []struct {
		selector string
		want     string
	}{
		{"spec.nodeName=fs-node-2", "fs-b fs-c"},
		{"spec.driver=fs-one.example.com", "fs-a fs-b"},
		{"spec.pool.name=fs-pool-c", "fs-c"},
		{"spec.nodeName=fs-node-2,spec.driver=fs-two.example.com", "fs-c"},
		{"spec.nodeName=fs-node-3", ""},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			out := s.MustKubectl(t, "", "get", "resourceslices", "--field-selector", tc.selector, "-o", "jsonpath={.items[*].metadata.name}")
			if out != tc.want {
				t.Errorf("--field-selector %s: got %q, want %q", tc.selector, out, tc.want)
			}
		})
	}
	if out, err := s.Kubectl(t, "", "get", "resourceslices", "--field-selector", "spec.bogus=x"); err == nil || !strings.Contains(out, "field label not supported") {
		t.Errorf("unknown field selector: got %v: %s", err, out)
	}
}

// TestOpenAPIPublishesRealVersions: the published group-version-kinds name
// served versions only, never the internal one core-lite registers too.
func TestOpenAPIPublishesRealVersions(t *testing.T) {
	s := sharedServer(t)
	for _, path := range []string{"/openapi/v2", "/openapi/v3/api/v1", "/openapi/v3/apis/resource.draplane.dev/v1"} {
		out := s.MustKubectl(t, "", "get", "--raw", path)
		if strings.Contains(out, "__internal") {
			t.Errorf("%s publishes the internal version", path)
		}
	}
	var spec struct {
		Definitions map[string]struct {
			GVKs []map[string]string `json:"x-kubernetes-group-version-kind"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal([]byte(s.MustKubectl(t, "", "get", "--raw", "/openapi/v2")), &spec); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []struct{ group, version, kind string }{
		{"", "v1", "Pod"}, {"coordination.k8s.io", "v1", "Lease"},
		{"resource.draplane.dev", "v1", "ResourceClaim"}, {"resource.draplane.dev", "v1beta1", "ResourceClaim"},
	} {
		found := false
		for _, definition := range spec.Definitions {
			for _, gvk := range definition.GVKs {
				found = found || (gvk["group"] == kind.group && gvk["version"] == kind.version && gvk["kind"] == kind.kind)
			}
		}
		if !found {
			t.Errorf("no OpenAPI definition for %+v", kind)
		}
	}
}
