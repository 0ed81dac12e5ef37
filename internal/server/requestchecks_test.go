package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/endpoints/request"
)

func TestQueryChecks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		query    string
		resource bool
		want     int
	}{
		{"no resource version", "watch=1", true, http.StatusOK},
		{"a number", "watch=1&resourceVersion=42", true, http.StatusOK},
		{"zero", "resourceVersion=0", true, http.StatusOK},
		{"letters", "watch=1&resourceVersion=abc", true, http.StatusBadRequest},
		{"negative", "resourceVersion=-5", true, http.StatusBadRequest},
		{"fraction", "resourceVersion=1.5", true, http.StatusBadRequest},
		{"not a resource request", "resourceVersion=abc", false, http.StatusOK},
		{"a timeout", "watch=1&timeoutSeconds=5", true, http.StatusOK},
		{"a negative timeout", "watch=1&timeoutSeconds=-1", true, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handler := withQueryChecks(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			req := httptest.NewRequest(http.MethodGet, "/apis/resource.draplane.dev/v1/resourceslices?"+tc.query, nil)
			req = req.WithContext(request.WithRequestInfo(req.Context(), &request.RequestInfo{IsResourceRequest: tc.resource, Verb: "watch"}))
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want == http.StatusBadRequest && !strings.Contains(rec.Body.String(), "resourceVersion") && !strings.Contains(rec.Body.String(), "timeoutSeconds") {
				t.Errorf("answer does not name the parameter: %s", rec.Body)
			}
		})
	}
}
