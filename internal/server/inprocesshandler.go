package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	utilwaitgroup "k8s.io/apimachinery/pkg/util/waitgroup"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// inProcessHandler serves the requests of the clients inside the process
// (controllers, simulator, informers) that do not stream: gets, lists,
// creates, updates, patches and deletes, six of every seven API requests
// while pods are placed. Such a request is authenticated and authorized by
// the server's own authenticator and authorizer; it gets its request info,
// deadline, receive time, audit context and ID and warning recorder as the
// generic filters would set them (the handlers need them: a patch without
// an audit context panics); it counts as in flight for a graceful
// shutdown; and it goes to the API handlers, where admission, validation,
// managedFields, storage and the request metrics are.
//
// It skips the filters that do nothing for a trusted caller in the same
// process: the tracing middleware (which, without a tracing backend, only
// extracts trace headers nobody sent), the per-request goroutine of the
// timeout filter, in-flight limits, CORS, HSTS, the HTTP logging and the
// filter latency metrics. The filters were a large share of the server's
// CPU while pods were placed, and in-process requests are most of them.
//
// A request that impersonates (the simulated nodes' requests do, as their
// node identities) goes through the generic server's own impersonation
// and authorization filters, in the order of the whole chain, before the
// API handlers: those filters refuse it, with the answer the whole chain
// gives, when the caller may not impersonate or the impersonated user may
// not do what it asks.
//
// Everything else goes through the whole chain: watches and other
// long-running requests, requests that do not authenticate or whose
// caller is not allowed (so that they fail as they would over the
// network), and every request when an audit backend is configured.
type inProcessHandler struct {
	full http.Handler
	api  http.Handler
	// impersonated serves the requests that impersonate: the
	// impersonation and authorization filters, then api; nil: the whole
	// chain serves them.
	impersonated http.Handler
	authn        authenticator.Request
	audiences    authenticator.Audiences
	authz        authorizer.Authorizer
	resolver     request.RequestInfoResolver
	longRunning  request.LongRunningRequestCheck
	timeout      time.Duration
	inFlight     *utilwaitgroup.SafeWaitGroup
}

// newInProcessHandler returns the handler of the in-process clients of a
// server with config, whose handler is full and whose API handlers behind
// the filters are api.
func newInProcessHandler(config *genericapiserver.Config, full, api http.Handler) http.Handler {
	if config.AuditBackend != nil || config.Authentication.Authenticator == nil || config.Authorization.Authorizer == nil ||
		config.RequestInfoResolver == nil || config.LongRunningFunc == nil {
		return full
	}
	var impersonated http.Handler
	if config.Serializer != nil && config.FeatureGate != nil {
		// As DefaultBuildHandlerChain puts them together.
		authorized := genericapifilters.WithAuthorization(api, config.Authorization.Authorizer, config.Serializer)
		if config.FeatureGate.Enabled(genericfeatures.ConstrainedImpersonation) {
			impersonated = impersonation.WithConstrainedImpersonation(authorized, config.Authorization.Authorizer, config.Serializer)
		} else {
			impersonated = impersonation.WithImpersonation(authorized, config.Authorization.Authorizer, config.Serializer)
		}
		impersonated = withRequestContext(impersonated)
	}
	return &inProcessHandler{
		full:         full,
		api:          withRequestContext(api),
		impersonated: impersonated,
		authn:        config.Authentication.Authenticator,
		audiences:    config.Authentication.APIAudiences,
		authz:        config.Authorization.Authorizer,
		resolver:     config.RequestInfoResolver,
		longRunning:  config.LongRunningFunc,
		timeout:      config.RequestTimeout,
		inFlight:     config.NonLongRunningRequestWaitGroup,
	}
}

// withRequestContext gives a direct request the audit context, ID and
// warning recorder the generic filters would.
func withRequestContext(h http.Handler) http.Handler {
	return genericapifilters.WithAuditInit(genericapifilters.WithWarningRecorder(h))
}

func (h *inProcessHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !h.serveDirect(w, req) {
		h.full.ServeHTTP(w, req)
	}
}

// serveDirect serves req past the filters and reports true, or reports
// false, having written nothing, when req needs the whole chain.
func (h *inProcessHandler) serveDirect(w http.ResponseWriter, req *http.Request) bool {
	impersonating := impersonates(req.Header)
	if impersonating && h.impersonated == nil {
		return false
	}
	info, err := h.resolver.NewRequestInfo(req)
	if err != nil || h.longRunning(req, info) {
		return false
	}
	ctx := req.Context()
	if len(h.audiences) > 0 {
		ctx = authenticator.WithAudiences(ctx, h.audiences)
	}
	resp, ok, err := h.authn.AuthenticateRequest(req.WithContext(ctx))
	if err != nil || !ok || !audiencesAccepted(h.audiences, resp.Audiences) {
		return false
	}
	ctx = request.WithRequestInfo(ctx, info)
	ctx = request.WithUser(ctx, resp.User)
	next := h.api
	if impersonating {
		// Authorized once impersonated, by the filters.
		next = h.impersonated
	} else {
		attributes, err := genericapifilters.GetAuthorizerAttributes(ctx)
		if err != nil {
			return false
		}
		if decision, _, err := h.authz.Authorize(ctx, attributes); err != nil || decision != authorizer.DecisionAllow {
			return false
		}
	}
	if h.inFlight != nil {
		if h.inFlight.Add(1) != nil {
			// Shutting down: the whole chain answers as it does then.
			return false
		}
		defer h.inFlight.Done()
	}
	ctx = request.WithReceivedTimestamp(ctx, time.Now())
	if timeout := h.requestTimeout(req); timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// As after authentication over the network: the credentials go no
	// further.
	req.Header.Del("Authorization")
	next.ServeHTTP(w, req.WithContext(ctx))
	return true
}

// requestTimeout is the deadline of a request: its timeout parameter if
// that is shorter than the server's request timeout, else the latter.
func (h *inProcessHandler) requestTimeout(req *http.Request) time.Duration {
	timeout := h.timeout
	if !strings.Contains(req.URL.RawQuery, "timeout=") {
		// Most requests have none: no need to parse the query.
		return timeout
	}
	if value := req.URL.Query().Get("timeout"); value != "" {
		if d, err := time.ParseDuration(value); err == nil && d > 0 && (timeout <= 0 || d < timeout) {
			timeout = d
		}
	}
	return timeout
}

// impersonates reports whether a request asks to act as another user.
// Header names are canonical (the impersonation filter reads them so too).
func impersonates(header http.Header) bool {
	for name := range header {
		if strings.HasPrefix(name, "Impersonate-") {
			return true
		}
	}
	return false
}

// audiencesAccepted: a server without API audiences takes any token; one
// with them needs a token for one of them.
func audiencesAccepted(api, token authenticator.Audiences) bool {
	if len(api) == 0 || len(token) == 0 {
		return true
	}
	return len(api.Intersect(token)) > 0
}
