package openapispec

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/draplane/draplane/generated/openapi"
	"github.com/draplane/draplane/test/integration/framework"
)

// TestOpenAPIBuiltOnRequest: the server builds its OpenAPI documents on
// first request (server.installOpenAPI), and serves the bytes that
// k8s.io/apiserver's own installation (routes.OpenAPI InstallV2 and
// InstallV3, as PrepareRun calls them) builds at start from the same web
// services, with the v3 config holding its definitions as it did before.
func TestOpenAPIBuiltOnRequest(t *testing.T) {
	config, srv := framework.NewServer(t.Context(), t, false, "")
	t.Cleanup(config.Close)
	generic := srv.GenericAPIServer

	const protoV2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	const protoV3 = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
	get := func(t *testing.T, h http.Handler, path, accept string) []byte {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s (%s): %d %s", path, accept, rec.Code, rec.Body.String())
		}
		return rec.Body.Bytes()
	}

	// The documents as served, each built on this first request.
	lazy := generic.Handler.NonGoRestfulMux
	type doc struct{ path, accept string }
	docs := []doc{{"/openapi/v2", "application/json"}, {"/openapi/v2", protoV2}, {"/openapi/v3", "application/json"}}
	var index struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(get(t, lazy, "/openapi/v3", "application/json"), &index); err != nil {
		t.Fatal(err)
	}
	for _, gv := range []string{"apis/resource.draplane.dev/v1", "apis/resource.k8s.io/v1", "api/v1"} {
		if _, ok := index.Paths[gv]; !ok {
			t.Errorf("/openapi/v3 lists no %s: %v", gv, index.Paths)
		}
	}
	for _, gv := range slices.Sorted(maps.Keys(index.Paths)) {
		docs = append(docs, doc{"/openapi/v3/" + gv, "application/json"}, doc{"/openapi/v3/" + gv, protoV3})
	}
	served := map[doc][]byte{}
	for _, d := range docs {
		served[d] = get(t, lazy, d.path, d.accept)
	}
	for _, want := range []struct {
		doc  doc
		name string
	}{
		{doc{"/openapi/v2", "application/json"}, "com.github.draplane.draplane.apis.resource.v1.ResourceClaim"},
		{doc{"/openapi/v2", "application/json"}, "io.k8s.api.core.v1.Pod"},
		{doc{"/openapi/v3/apis/resource.draplane.dev/v1", "application/json"}, "com.github.draplane.draplane.apis.resource.v1.ResourceClaim"},
		{doc{"/openapi/v3/api/v1", "application/json"}, "io.k8s.api.core.v1.Pod"},
	} {
		if !bytes.Contains(served[want.doc], []byte(`"`+want.name+`"`)) {
			t.Errorf("%s lacks %s", want.doc.path, want.name)
		}
	}

	// The same documents built as k8s.io/apiserver builds them at start.
	v3 := *config.Generic.OpenAPIV3Config
	v3.Definitions = openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		published, _ := v3.GetDefinitionName(name)
		return spec.MustCreateRef("#/components/schemas/" + openapicommon.EscapeJsonPointer(published))
	})
	eager := mux.NewPathRecorderMux("eager")
	routes.OpenAPI{Config: config.Generic.OpenAPIConfig}.InstallV2(generic.Handler.GoRestfulContainer, eager)
	routes.OpenAPI{V3Config: &v3}.InstallV3(generic.Handler.GoRestfulContainer, eager)

	for _, d := range docs {
		if want := get(t, eager, d.path, d.accept); !bytes.Equal(served[d], want) {
			t.Errorf("%s (%s): served %d bytes that differ from the %d built at start", d.path, d.accept, len(served[d]), len(want))
		}
	}
}
