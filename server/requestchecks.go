package server

import (
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// withResourceVersionCheck refuses a resourceVersion parameter that is not
// a decimal number (every resource version this server hands out is one)
// with 400 naming it. The generic handlers refuse such a value for lists
// themselves but answer a get or a watch with 500.
func withResourceVersionCheck(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rv := req.URL.Query().Get("resourceVersion")
		if rv == "" {
			handler.ServeHTTP(w, req)
			return
		}
		if info, ok := request.RequestInfoFrom(req.Context()); ok && info.IsResourceRequest {
			if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
				status := apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: resourceVersion: Invalid value: %q: must be a decimal number", rv)).Status()
				status.Kind, status.APIVersion = "Status", "v1"
				responsewriters.WriteRawJSON(http.StatusBadRequest, status, w)
				return
			}
		}
		handler.ServeHTTP(w, req)
	})
}
