package server

import (
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
)

// kindStorage is a storage that only tells its kind.
type kindStorage struct{ obj runtime.Object }

func (s kindStorage) New() runtime.Object { return s.obj.DeepCopyObject() }
func (s kindStorage) Destroy()            {}

// TestServedIn checks which kinds each version serves, by the binary's
// version: v1beta1 is deprecated in 0.1 and removed in 0.3.
func TestServedIn(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	storage := map[string]rest.Storage{
		"deviceclasses":           kindStorage{&resourceapi.DeviceClass{}},
		"resourceclaims":          kindStorage{&resourceapi.ResourceClaim{}},
		"resourceclaims/status":   kindStorage{&resourceapi.ResourceClaim{}},
		"resourceclaimtemplates":  kindStorage{&resourceapi.ResourceClaimTemplate{}},
		"resourceslices":          kindStorage{&resourceapi.ResourceSlice{}},
		"devicetaintrules":        kindStorage{&resourceapi.DeviceTaintRule{}},
		"devicetaintrules/status": kindStorage{&resourceapi.DeviceTaintRule{}},
	}
	all := "deviceclasses devicetaintrules devicetaintrules/status resourceclaims resourceclaims/status resourceclaimtemplates resourceslices"
	beta := "deviceclasses resourceclaims resourceclaims/status resourceclaimtemplates resourceslices"
	tests := map[string]struct {
		info          version.Info
		wantV1, wantB string
	}{
		"built without ldflags": {info: version.Info{GitVersion: "v0.0.0-master+$Format:%H$"}, wantV1: all, wantB: beta},
		"0.1":                   {info: version.Info{Major: "0", Minor: "1", GitVersion: "v0.1.0"}, wantV1: all, wantB: beta},
		"0.1 dev":               {info: version.Info{Major: "0", Minor: "1", GitVersion: "v0.1.0-dev"}, wantV1: all, wantB: beta},
		"0.2":                   {info: version.Info{Major: "0", Minor: "2", GitVersion: "v0.2.0"}, wantV1: all, wantB: beta},
		"0.3 removes v1beta1":   {info: version.Info{Major: "0", Minor: "3", GitVersion: "v0.3.0"}, wantV1: all, wantB: ""},
		"1.0":                   {info: version.Info{Major: "1", Minor: "0", GitVersion: "v1.0.0"}, wantV1: all, wantB: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			expiration, err := expirationEvaluator(tc.info)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(servedIn(scheme, resourcev1.SchemeGroupVersion, storage, expiration)); got != tc.wantV1 {
				t.Errorf("v1 serves %q, want %q", got, tc.wantV1)
			}
			if got := keys(servedIn(scheme, resourcev1beta1.SchemeGroupVersion, storage, expiration)); got != tc.wantB {
				t.Errorf("v1beta1 serves %q, want %q", got, tc.wantB)
			}
		})
	}
}

func keys(m map[string]rest.Storage) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
