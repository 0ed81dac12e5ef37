package server

import (
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// withQueryChecks refuses a resourceVersion parameter that is not
// a decimal number (every resource version this server hands out is one)
// and a negative timeoutSeconds with 400 naming the parameter. The generic
// handlers refuse such a resource version for lists themselves but answer
// a get or a watch with 500, and a watch with a negative timeout with an
// internal error in the event stream.
func withQueryChecks(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		query := req.URL.Query()
		rv, timeout := query.Get("resourceVersion"), query.Get("timeoutSeconds")
		if rv == "" && timeout == "" {
			handler.ServeHTTP(w, req)
			return
		}
		if info, ok := request.RequestInfoFrom(req.Context()); ok && info.IsResourceRequest {
			var problem string
			if _, err := strconv.ParseUint(rv, 10, 64); rv != "" && err != nil {
				problem = fmt.Sprintf("invalid resource version: resourceVersion: Invalid value: %q: must be a decimal number", rv)
			} else if seconds, err := strconv.ParseInt(timeout, 10, 64); timeout != "" && err == nil && seconds < 0 {
				problem = fmt.Sprintf("timeoutSeconds: Invalid value: %d: must not be negative", seconds)
			}
			if problem != "" {
				status := apierrors.NewBadRequest(problem).Status()
				status.Kind, status.APIVersion = "Status", "v1"
				responsewriters.WriteRawJSON(http.StatusBadRequest, status, w)
				return
			}
		}
		handler.ServeHTTP(w, req)
	})
}
