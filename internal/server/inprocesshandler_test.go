package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	utilwaitgroup "k8s.io/apimachinery/pkg/util/waitgroup"
	auditinternal "k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

const (
	testToken = "Bearer loopback-token"
	// plainToken is a user's who may not impersonate.
	plainToken = "Bearer plain-token"
)

// tokenAuth knows two bearer tokens, the loopback user's and plain's.
type tokenAuth struct{}

func (tokenAuth) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	switch req.Header.Get("Authorization") {
	case testToken:
		return &authenticator.Response{User: &user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}}, true, nil
	case plainToken:
		return &authenticator.Response{User: &user.DefaultInfo{Name: "plain", Groups: []string{user.AllAuthenticated}}}, true, nil
	}
	return nil, false, nil
}

// denyDeletes allows everything but deletes, and impersonation to plain.
type denyDeletes struct{ authorizer.Authorizer }

func (denyDeletes) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() == "delete" {
		return authorizer.DecisionDeny, "no deletes", nil
	}
	if strings.HasPrefix(a.GetVerb(), "impersonate") && a.GetUser().GetName() == "plain" {
		return authorizer.DecisionDeny, "no impersonation", nil
	}
	return authorizer.DecisionAllow, "", nil
}

// seen is what the API handler saw of a request that reached it directly.
type seen struct {
	user          string
	verb          string
	authorization string
	deadline      time.Duration
	received      bool
	audited       bool
}

type nopAuditBackend struct{ auditinternal.Backend }

func TestInProcessHandler(t *testing.T) {
	tests := map[string]struct {
		method, url string
		header      http.Header
		shutdown    bool
		audit       bool
		// noFeatureGate: a config without feature gates.
		noFeatureGate bool
		// wantDirect: served past the filters; else by the whole chain.
		wantDirect bool
		// wantRefused: refused (403) past the filters, by the
		// impersonation or authorization filter.
		wantRefused bool
		want        seen
	}{
		"create": {
			method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {testToken}},
			wantDirect: true, want: seen{user: user.APIServerUser, verb: "create", deadline: time.Minute, received: true, audited: true},
		},
		"status update, shorter timeout": {
			method: http.MethodPut, url: "/apis/resource.draplane.dev/v1/namespaces/ns/resourceclaims/c/status?timeout=10s", header: http.Header{"Authorization": {testToken}},
			wantDirect: true, want: seen{user: user.APIServerUser, verb: "update", deadline: 10 * time.Second, received: true, audited: true},
		},
		"list": {
			method: http.MethodGet, url: "/api/v1/pods", header: http.Header{"Authorization": {testToken}},
			wantDirect: true, want: seen{user: user.APIServerUser, verb: "list", deadline: time.Minute, received: true, audited: true},
		},
		"impersonation": {
			method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {testToken}, "Impersonate-User": {"system:node:n1"}, "Impersonate-Group": {"system:nodes"}},
			wantDirect: true, want: seen{user: "system:node:n1", verb: "create", deadline: time.Minute, received: true, audited: true},
		},
		"impersonation not allowed": {
			method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {plainToken}, "Impersonate-User": {"system:node:n1"}},
			wantRefused: true,
		},
		"impersonated user not allowed": {
			method: http.MethodDelete, url: "/api/v1/namespaces/ns/pods/p", header: http.Header{"Authorization": {testToken}, "Impersonate-User": {"system:node:n1"}},
			wantRefused: true,
		},
		"impersonation without feature gates": {
			method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {testToken}, "Impersonate-User": {"system:node:n1"}},
			noFeatureGate: true,
		},
		"watch":                    {method: http.MethodGet, url: "/api/v1/pods?watch=true", header: http.Header{"Authorization": {testToken}}},
		"unknown token":            {method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {"Bearer other"}}},
		"no credentials":           {method: http.MethodPost, url: "/api/v1/namespaces/ns/pods"},
		"not allowed":              {method: http.MethodDelete, url: "/api/v1/namespaces/ns/pods/p", header: http.Header{"Authorization": {testToken}}},
		"shutting down":            {method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {testToken}}, shutdown: true},
		"audited: the whole chain": {method: http.MethodPost, url: "/api/v1/namespaces/ns/pods", header: http.Header{"Authorization": {testToken}}, audit: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			config := &genericapiserver.Config{
				RequestInfoResolver:            &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")},
				LongRunningFunc:                genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString()),
				RequestTimeout:                 time.Minute,
				NonLongRunningRequestWaitGroup: new(utilwaitgroup.SafeWaitGroup),
			}
			config.Authentication.Authenticator = tokenAuth{}
			config.Authorization.Authorizer = denyDeletes{}
			config.Serializer = testCodecs()
			if !tc.noFeatureGate {
				config.FeatureGate = utilfeature.DefaultFeatureGate
			}
			if tc.audit {
				config.AuditBackend = nopAuditBackend{}
			}
			if tc.shutdown {
				config.NonLongRunningRequestWaitGroup.Wait()
			}
			full := 0
			var got *seen
			api := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				ctx := req.Context()
				s := seen{authorization: req.Header.Get("Authorization")}
				if u, ok := request.UserFrom(ctx); ok {
					s.user = u.GetName()
				}
				if info, ok := request.RequestInfoFrom(ctx); ok {
					s.verb = info.Verb
				}
				if deadline, ok := ctx.Deadline(); ok {
					s.deadline = time.Until(deadline).Round(time.Second)
				}
				_, s.received = request.ReceivedTimestampFrom(ctx)
				// The handlers log patches into the audit context and
				// panic without one.
				s.audited = auditinternal.AuditContextFrom(ctx) != nil && auditinternal.GetAuditIDTruncated(ctx) != ""
				got = &s
				w.WriteHeader(http.StatusOK)
			})
			h := newInProcessHandler(config, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				full++
				w.WriteHeader(http.StatusTeapot)
			}), api)
			req := httptest.NewRequest(tc.method, tc.url, nil)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)

			if tc.wantRefused {
				if full != 0 || got != nil || w.Code != http.StatusForbidden {
					t.Fatalf("whole chain called %d times, API handler directly: %v, status %d; want 403 past the filters", full, got != nil, w.Code)
				}
				return
			}
			if !tc.wantDirect {
				if full != 1 || got != nil {
					t.Fatalf("whole chain called %d times, API handler directly: %v; want the whole chain once", full, got != nil)
				}
				return
			}
			if full != 0 || got == nil {
				t.Fatalf("whole chain called %d times, API handler directly: %v; want the API handler", full, got != nil)
			}
			if *got != tc.want {
				t.Errorf("API handler saw %+v, want %+v", *got, tc.want)
			}
			if w.Code != http.StatusOK {
				t.Errorf("status %d, want 200", w.Code)
			}
		})
	}
}

// testCodecs encode the Status of a refusal.
func testCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme)
}

// The wait group counts a direct request while it runs, so that a
// graceful shutdown waits for it.
func TestInProcessHandlerInFlight(t *testing.T) {
	wg := new(utilwaitgroup.SafeWaitGroup)
	config := &genericapiserver.Config{
		RequestInfoResolver:            &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")},
		LongRunningFunc:                genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString()),
		NonLongRunningRequestWaitGroup: wg,
	}
	config.Authentication.Authenticator = tokenAuth{}
	config.Authorization.Authorizer = denyDeletes{}
	release := make(chan struct{})
	entered := make(chan struct{})
	h := newInProcessHandler(config, http.NotFoundHandler(), http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		close(entered)
		<-release
	}))
	req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ns/pods", nil)
	req.Header.Set("Authorization", testToken)
	go h.ServeHTTP(httptest.NewRecorder(), req)
	<-entered
	waited := make(chan struct{})
	go func() {
		wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("shutdown did not wait for the request in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown still waits after the request ended")
	}
}
