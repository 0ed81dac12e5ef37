package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestBadInput sends malformed and hostile requests over HTTP as the admin:
// each must be refused with the right 4xx, the answer must name the field
// where there is one, and the server must stay healthy after every one.
func TestBadInput(t *testing.T) {
	s := sharedServer(t)
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const group = "/apis/resource.draplane.dev/v1"
	claims := group + "/namespaces/default/resourceclaims"

	// A claim whose status gets 257 consumers.
	claimClient := s.Client(t).ResourceV1().ResourceClaims("default")
	claim, err := claimClient.Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "badinput-reserved"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "pool", Device: "dev-0"}},
	}}
	for i := range 257 {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
		})
	}
	claim.APIVersion, claim.Kind = "resource.draplane.dev/v1", "ResourceClaim"
	tooManyConsumers, err := json.Marshal(claim)
	if err != nil {
		t.Fatal(err)
	}

	claimJSON := func(name, spec string) string {
		return `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"` + name + `"},"spec":` + spec + `}`
	}
	classJSON := func(name, expression string) string {
		e, _ := json.Marshal(expression)
		return `{"apiVersion":"resource.draplane.dev/v1","kind":"DeviceClass","metadata":{"name":"` + name + `"},"spec":{"selectors":[{"cel":{"expression":` + string(e) + `}}]}}`
	}
	goodRequests := `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}`
	bigList := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprint(i)
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	depth := 100000

	for _, tc := range []struct {
		name        string
		client      *http.Client
		method      string
		path        string
		contentType string
		body        string
		// want is the allowed status codes.
		want []int
		// mention must all appear in the answer (the field, the reason).
		mention []string
	}{
		{
			name: "syntax error", method: "POST", path: claims,
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim",`,
			want: []int{http.StatusBadRequest},
		},
		{
			name: "list where an object belongs", method: "POST", path: claims,
			body: `[1,2,3]`,
			want: []int{http.StatusBadRequest},
		},
		{
			name: "string where a list belongs", method: "POST", path: claims,
			body: claimJSON("badinput-wrong-type", `{"devices":{"requests":"gpu"}}`),
			want: []int{http.StatusBadRequest}, mention: []string{"requests"},
		},
		{
			name: "string where a number belongs", method: "POST", path: claims,
			body: claimJSON("badinput-wrong-count", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com","count":"two"}}]}}`),
			want: []int{http.StatusBadRequest}, mention: []string{"count"},
		},
		{
			name: "object where a string belongs", method: "POST", path: claims,
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":{"a":1}},"spec":` + goodRequests + `}`,
			want: []int{http.StatusBadRequest}, mention: []string{"name"},
		},
		{
			name: "unknown field, strict", method: "POST", path: claims + "?fieldValidation=Strict",
			body: claimJSON("badinput-unknown", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"},"bogusField":1}]}}`),
			want: []int{http.StatusBadRequest}, mention: []string{"unknown field", "bogusField"},
		},
		{
			name: "duplicate field, strict", method: "POST", path: claims + "?fieldValidation=Strict",
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"badinput-dup","name":"again"},"spec":` + goodRequests + `}`,
			want: []int{http.StatusBadRequest}, mention: []string{"duplicate field", "name"},
		},
		{
			name: "unknown field, strict, slice", method: "POST", path: group + "/resourceslices?fieldValidation=Strict",
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceSlice","metadata":{"name":"badinput-slice"},"spec":{"driver":"d.example.com","nodeName":"n","pool":{"name":"p","resourceSliceCount":1,"generation":1},"devices":[{"name":"d0","colour":"red"}]}}`,
			want: []int{http.StatusBadRequest}, mention: []string{"unknown field", "colour"},
		},
		{
			name: "body over 3 MiB", method: "POST", path: claims,
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"badinput-huge","annotations":{"x":"` + strings.Repeat("x", 3<<20+1024) + `"}},"spec":` + goodRequests + `}`,
			want: []int{http.StatusRequestEntityTooLarge},
		},
		{
			name: "body over 3 MiB, unauthenticated", client: anonymous, method: "POST", path: claims,
			body: strings.Repeat(" ", 4<<20),
			want: []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge},
		},
		{
			name: "deeply nested arrays", method: "POST", path: claims,
			body: claimJSON("badinput-deep", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]},"deep":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}`),
			want: []int{http.StatusBadRequest, http.StatusUnprocessableEntity},
		},
		{
			name: "deeply nested objects", method: "POST", path: claims,
			body: claimJSON("badinput-deep-obj", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]},"deep":`+strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)+`}`),
			want: []int{http.StatusBadRequest, http.StatusUnprocessableEntity},
		},
		{
			name: "deeply nested, strict", method: "POST", path: claims + "?fieldValidation=Strict",
			body: claimJSON("badinput-deep-strict", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]},"deep":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}`),
			want: []int{http.StatusBadRequest, http.StatusUnprocessableEntity},
		},
		{
			name: "CEL with huge estimated cost", method: "POST", path: group + "/deviceclasses",
			body: classJSON("badinput-expensive", fmt.Sprintf("%s.all(x, %s.all(y, %s.all(z, x + y + z >= 0)))", bigList(200), bigList(200), bigList(200))),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"spec.selectors[0].cel.expression", "cost"},
		},
		{
			name: "CEL with huge estimated cost in a claim", method: "POST", path: claims,
			body: claimJSON("badinput-expensive", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com","selectors":[{"cel":{"expression":`+
				fmt.Sprintf("%q", `device.attributes["dra.example.com"].all(a, device.attributes["dra.example.com"].all(b, device.attributes["dra.example.com"].all(c, device.attributes["dra.example.com"].all(d, string(device.attributes["dra.example.com"][a]).contains(string(device.attributes["dra.example.com"][d]))))))`)+
				`}}]}}]}}`),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"spec.devices.requests[0].exactly.selectors[0].cel.expression", "cost"},
		},
		{
			name: "CEL too long", method: "POST", path: group + "/deviceclasses",
			body: classJSON("badinput-long-cel", "true || "+strings.Repeat(" ", 11000)+"true"),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"spec.selectors[0].cel.expression"},
		},
		{
			name: "CEL syntax error", method: "POST", path: group + "/deviceclasses",
			body: classJSON("badinput-bad-cel", `device.driver == `),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"spec.selectors[0].cel.expression"},
		},
		{
			name: "257 reservedFor entries", method: "PUT", path: claims + "/badinput-reserved/status",
			body: string(tooManyConsumers),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"status.reservedFor", "256"},
		},
		{
			name: "name too long", method: "POST", path: claims,
			body: claimJSON(strings.Repeat("a", 254), goodRequests),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"metadata.name"},
		},
		{
			name: "name far too long", method: "POST", path: group + "/deviceclasses",
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"DeviceClass","metadata":{"name":"` + strings.Repeat("a", 100000) + `"},"spec":{}}`,
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"metadata.name"},
		},
		{
			name: "name not a DNS subdomain", method: "POST", path: claims,
			body: claimJSON("Bad_Name", goodRequests),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"metadata.name"},
		},
		{
			name: "too many requests", method: "POST", path: claims,
			body: func() string {
				var reqs []string
				for i := range 40 {
					reqs = append(reqs, fmt.Sprintf(`{"name":"r%d","exactly":{"deviceClassName":"gpu.example.com"}}`, i))
				}
				return claimJSON("badinput-many-requests", `{"devices":{"requests":[`+strings.Join(reqs, ",")+`]}}`)
			}(),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"spec.devices.requests"},
		},
		{
			name: "negative count", method: "POST", path: claims,
			body: claimJSON("badinput-negative", `{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com","allocationMode":"ExactCount","count":-5}}]}}`),
			want: []int{http.StatusUnprocessableEntity}, mention: []string{"spec.devices.requests[0].exactly.count"},
		},
		{
			name: "kind does not match the resource", method: "POST", path: claims,
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"DeviceClass","metadata":{"name":"badinput-kind"},"spec":{}}`,
			want: []int{http.StatusBadRequest},
		},
		{
			name: "unknown kind", method: "POST", path: claims,
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"Nonsense","metadata":{"name":"badinput-nonsense"}}`,
			want: []int{http.StatusBadRequest},
		},
		{
			name: "namespace in body differs from the path", method: "POST", path: claims,
			body: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"badinput-ns","namespace":"other"},"spec":` + goodRequests + `}`,
			want: []int{http.StatusBadRequest}, mention: []string{"namespace"},
		},
		{
			name: "unsupported content type", method: "POST", path: claims, contentType: "text/plain",
			body: claimJSON("badinput-text", goodRequests),
			want: []int{http.StatusUnsupportedMediaType},
		},
		{
			name: "invalid UTF-8 in a name", method: "POST", path: claims,
			body: claimJSON("bad\xff\xfe", goodRequests),
			want: []int{http.StatusBadRequest, http.StatusUnprocessableEntity},
		},
		{
			name: "bad field selector", method: "GET", path: claims + "?fieldSelector=spec.nonsense%3Dx",
			want: []int{http.StatusBadRequest}, mention: []string{"spec.nonsense"},
		},
		{
			name: "bad label selector", method: "GET", path: claims + "?labelSelector=a%20in%20(",
			want: []int{http.StatusBadRequest},
		},
		{
			name: "JSON patch to a wrong path", method: "PATCH", path: claims + "/badinput-reserved", contentType: "application/json-patch+json",
			body: `[{"op":"replace","path":"/spec/devices/requests/0/exactly/count","value":"many"}]`,
			want: []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, mention: []string{"count"},
		},
		{
			name: "merge patch with a wrong type", method: "PATCH", path: claims + "/badinput-reserved", contentType: "application/merge-patch+json",
			body: `{"metadata":{"labels":"not-a-map"}}`,
			want: []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, mention: []string{"labels"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client
			if client == nil {
				client = admin
			}
			collection := collectionOf(tc.path)
			before := storedNames(t, admin, s.URL+collection)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, s.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			contentType := tc.contentType
			if contentType == "" {
				contentType = "application/json"
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", contentType)
			}
			req.Header.Set("Accept", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			var answer bytes.Buffer
			_, _ = answer.ReadFrom(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			ok := false
			for _, code := range tc.want {
				ok = ok || resp.StatusCode == code
			}
			if !ok {
				t.Errorf("status %d, want one of %v; answer: %.2000s", resp.StatusCode, tc.want, answer.String())
			}
			for _, m := range tc.mention {
				if !strings.Contains(answer.String(), m) {
					t.Errorf("answer does not mention %q: %.2000s", m, answer.String())
				}
			}
			healthy(t, s, anonymous)
			// Nothing of its kind was stored or changed by it.
			after := storedNames(t, admin, s.URL+collection)
			for name, rv := range after {
				if !badInputName(name) {
					continue // another test's object
				}
				switch old, ok := before[name]; {
				case !ok:
					t.Errorf("refused request stored %s %.80q", collection, name)
				case old != rv:
					t.Errorf("refused request changed %s %.80q: resourceVersion %s -> %s", collection, name, old, rv)
				}
			}
		})
	}

	// The claim the status and patch cases aimed at is as it was created.
	got, err := claimClient.Get(ctx, "badinput-reserved", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Allocation != nil || len(got.Status.ReservedFor) != 0 {
		t.Errorf("refused status update was stored: %+v", got.Status)
	}
	if got.ResourceVersion != claim.ResourceVersion {
		t.Errorf("refused writes changed badinput-reserved: resourceVersion %s -> %s", claim.ResourceVersion, got.ResourceVersion)
	}
}

// collectionOf is the collection a request path names: the path without
// its query, and without an object name and subresource.
func collectionOf(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// apis/<group>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<sub>]]
	n := 4
	if len(parts) > 3 && parts[3] == "namespaces" {
		n = 6
	}
	return "/" + strings.Join(parts[:min(n, len(parts))], "/")
}

// badInputName: a name this test's requests use (its own objects all
// start with "badinput-"; the rest are the malformed names of some cases).
func badInputName(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), "bad") || name == "again" || len(name) > 63
}

// storedNames lists a collection as the admin: name -> resourceVersion.
func storedNames(t *testing.T, admin *http.Client, url string) map[string]string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatalf("list %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list %s: status %d", url, resp.StatusCode)
	}
	var list metav1.PartialObjectMetadataList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("list %s: %v", url, err)
	}
	names := map[string]string{}
	for _, item := range list.Items {
		names[item.Name] = item.ResourceVersion
	}
	return names
}

// healthy fails the test unless /readyz answers 200.
func healthy(t *testing.T, s *testServer, client *http.Client) {
	t.Helper()
	resp, err := client.Get(s.URL + "/readyz")
	if err != nil {
		t.Fatalf("server unhealthy: /readyz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("server unhealthy: /readyz status %d", resp.StatusCode)
	}
}
