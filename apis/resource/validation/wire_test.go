package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
)

// decodeClaim decodes JSON of any served version into the hub type, the
// way the API server does before validating (including defaulting).
func decodeClaim(t *testing.T, data string) *resourceapi.ResourceClaim {
	t.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	decoder := serializer.NewCodecFactory(scheme).UniversalDecoder(resourceapi.SchemeGroupVersion)
	obj, _, err := decoder.Decode([]byte(data), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		t.Fatalf("decoded %T, want *ResourceClaim", obj)
	}
	return claim
}

// Requests as users write them in each version, decoded and validated
// end to end. The mixed v1beta1 request is the case conversion leaves to
// validation.
func TestValidateDecodedClaims(t *testing.T) {
	tests := map[string]struct {
		json string
		want []string
	}{
		"v1 exactly": {json: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},
			"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}`},
		"v1 firstAvailable": {json: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},
			"spec":{"devices":{"requests":[{"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.example.com"}]}]}}}`},
		"v1beta1 flat": {json: `{"apiVersion":"resource.draplane.dev/v1beta1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},
			"spec":{"devices":{"requests":[{"name":"gpu","deviceClassName":"gpu.example.com","count":2}]}}}`},
		"v1beta1 firstAvailable": {json: `{"apiVersion":"resource.draplane.dev/v1beta1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},
			"spec":{"devices":{"requests":[{"name":"gpu","firstAvailable":[{"name":"big","deviceClassName":"gpu.example.com"}]}]}}}`},
		"v1beta1 flat and firstAvailable": {json: `{"apiVersion":"resource.draplane.dev/v1beta1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},
			"spec":{"devices":{"requests":[{"name":"gpu","deviceClassName":"gpu.example.com","firstAvailable":[{"name":"big","deviceClassName":"gpu.example.com"}]}]}}}`,
			want: []string{invalid("spec.devices.requests[0]")}},
		"v1beta1 flat bad selector": {json: `{"apiVersion":"resource.draplane.dev/v1beta1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"default"},
			"spec":{"devices":{"requests":[{"name":"gpu","deviceClassName":"gpu.example.com","selectors":[{"cel":{"expression":"device.driver"}}]}]}}}`,
			want: []string{invalid("spec.devices.requests[0].exactly.selectors[0].cel.expression")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, ValidateResourceClaim(decodeClaim(t, tc.json)), tc.want)
		})
	}
}
