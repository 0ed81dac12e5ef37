package server

import (
	"net/http"
	"sync"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/draplane/draplane/internal/auth/node"
)

// Who writes: the API's write requests counted by the kind of writer, so
// that a benchmark can tell the control plane's own writes per pod from
// the client's and the (simulated) kubelets'. apiserver_request_total
// counts by verb and resource, where a pod's status written by a
// controller and by its kubelet look alike.

// Writers, the values of the writer label.
const (
	// WriterControlPlane: the process's own clients (controllers,
	// informers, the pool view), which run as the loopback user.
	WriterControlPlane = "control-plane"
	// WriterNode: node identities, the simulated kubelets and node
	// agents included.
	WriterNode = "node"
	// WriterClient: everyone else.
	WriterClient = "client"
)

var (
	apiWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "draplane",
		Subsystem:      "apiserver",
		Name:           "write_requests_total",
		Help:           "Write requests (POST, PUT, PATCH, DELETE) to the API, whatever their answer, by writer: control-plane (the process's own controllers), node (node identities) or client.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"writer"})
	registerWriters sync.Once
)

// withWriteCounts counts the write requests that reach the API handlers
// (after authentication and impersonation) by writer.
func withWriteCounts(api http.Handler) http.Handler {
	registerWriters.Do(func() { legacyregistry.MustRegister(apiWrites) })
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			u, _ := request.UserFrom(req.Context())
			apiWrites.WithLabelValues(writerOf(u)).Inc()
		}
		api.ServeHTTP(w, req)
	})
}

func writerOf(u user.Info) string {
	switch {
	case u == nil:
		return WriterClient
	case u.GetName() == user.APIServerUser:
		return WriterControlPlane
	}
	if _, ok := node.Identify(u); ok {
		return WriterNode
	}
	return WriterClient
}
