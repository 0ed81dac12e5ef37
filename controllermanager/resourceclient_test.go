package controllermanager

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// claimJSON is a claim as the server sends it, managedFields included.
const claimJSON = `{"kind":"ResourceClaim","apiVersion":"resource.draplane.dev/v1","metadata":{"name":"c","namespace":"ns","resourceVersion":"7","managedFields":[{"manager":"m","operation":"Update","apiVersion":"resource.draplane.dev/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu","count":1}}]}}}`

// TestResourceClient: the in-process resource client reads objects,
// lists and watch events as the generated one does, its v1 client decodes
// with codec's meta factory and frame reader, and both versions share one
// rate limiter.
func TestResourceClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", claimJSON)
			fmt.Fprintf(w, `{"type":"DELETED","object":%s}`+"\n", claimJSON)
		case r.URL.Path == "/apis/resource.draplane.dev/v1/namespaces/ns/resourceclaims/c":
			fmt.Fprint(w, claimJSON)
		case r.URL.Path == "/apis/resource.draplane.dev/v1/namespaces/ns/resourceclaims":
			fmt.Fprintf(w, `{"kind":"ResourceClaimList","apiVersion":"resource.draplane.dev/v1","metadata":{"resourceVersion":"9"},"items":[%s,%s]}`, claimJSON, claimJSON)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	client, err := newResourceClient(&rest.Config{Host: srv.URL, QPS: 50, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claims := client.ResourceV1().ResourceClaims("ns")

	claim, err := claims.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Name != "c" || claim.ResourceVersion != "7" || len(claim.ManagedFields) != 1 || claim.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu" {
		t.Errorf("get: %+v", claim)
	}
	list, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.ResourceVersion != "9" || list.Items[1].Name != "c" {
		t.Errorf("list: %+v", list)
	}
	w, err := claims.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for e := range w.ResultChan() {
		if e.Type == watch.Error {
			t.Fatalf("watch error: %v", e.Object)
		}
		events = append(events, fmt.Sprintf("%s %s", e.Type, e.Object.(interface{ GetName() string }).GetName()))
	}
	if fmt.Sprint(events) != "[ADDED c DELETED c]" {
		t.Errorf("watch events %v", events)
	}

	v1 := client.ResourceV1().RESTClient().(*rest.RESTClient)
	for _, name := range []string{"codec.typeMetaFactory", "codec.jsonFramer"} {
		if !holdsType(reflect.ValueOf(v1), name, 25, map[uintptr]bool{}) {
			t.Errorf("the v1 client does not decode with %s", name)
		}
	}
	if v1.GetRateLimiter() != client.ResourceV1beta1().RESTClient().GetRateLimiter() {
		t.Error("the v1 and v1beta1 clients have rate limiters of their own")
	}
}

// holdsType reports whether a value of the named type is reachable from v
// through at most depth pointers, interfaces, structs and slices, each
// pointer followed once.
func holdsType(v reflect.Value, name string, depth int, seen map[uintptr]bool) bool {
	if !v.IsValid() || depth < 0 {
		return false
	}
	if v.Type().String() == name {
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return false
		}
		seen[v.Pointer()] = true
		return holdsType(v.Elem(), name, depth-1, seen)
	case reflect.Interface:
		return !v.IsNil() && holdsType(v.Elem(), name, depth-1, seen)
	case reflect.Struct:
		for i := range v.NumField() {
			if holdsType(v.Field(i), name, depth-1, seen) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if holdsType(v.Index(i), name, depth-1, seen) {
				return true
			}
		}
	}
	return false
}
