package app

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	"k8s.io/klog/v2/ktesting"

	"github.com/draplane/draplane/internal/server"
)

// TestRouteSelector: for the routes the server installs, and requests
// made from their paths with every kind of parameter, method and header,
// the server's route selector picks what go-restful's CurlyRouter picks,
// and fails as it fails.
func TestRouteSelector(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := NewOptions()
	o.DataDir = t.TempDir()
	o.SecureServing.BindPort = 0
	o.EmbeddedEtcd.UnsafeNoFsync = true
	o.Controllers.Run = false
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cfg.Close)
	srv, err := cfg.Complete().New()
	if err != nil {
		t.Fatal(err)
	}
	services := srv.GenericAPIServer.Handler.GoRestfulContainer.RegisteredWebServices()

	var paths []string
	statics := map[string]bool{}
	for _, ws := range services {
		for _, r := range ws.Routes() {
			for _, part := range strings.Split(r.Path, "/") {
				if !strings.HasPrefix(part, "{") {
					statics[part] = true
				}
			}
		}
	}
	values := []string{"x", "", "default", "my-claim"}
	for s := range statics {
		values = append(values, s)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ws := range services {
		paths = append(paths, ws.RootPath(), ws.RootPath()+"/", ws.RootPath()+"/nothing")
		for _, r := range ws.Routes() {
			for range 6 {
				parts := strings.Split(r.Path, "/")
				for i, part := range parts {
					if strings.HasPrefix(part, "{") {
						parts[i] = values[rng.IntN(len(values))]
					}
				}
				path := strings.Join(parts, "/")
				paths = append(paths, path, path+"/", path+"/extra", strings.Replace(path, "/", "//", 2))
			}
		}
	}
	paths = append(paths, "/", "", "/apis", "/api/v1/"+strings.Repeat("a/", 40), "/no/such/thing")

	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions, "BREW"}
	contentTypes := []string{"", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/apply-patch+yaml",
		"application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json", "text/plain",
		"application/json;charset=utf-8", " text/plain , application/json"}
	accepts := []string{"", "*/*", "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io, application/json", "text/html",
		"application/vnd.kubernetes.protobuf;stream=watch", "text/html, application/yaml;q=0.9"}

	ours := server.NewRouteSelector()
	curly := restful.CurlyRouter{}
	compared := 0
	for _, path := range paths {
		for _, method := range methods {
			for range 4 {
				req := &http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}}
				if ct := contentTypes[rng.IntN(len(contentTypes))]; ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				if accept := accepts[rng.IntN(len(accepts))]; accept != "" {
					req.Header.Set("Accept", accept)
				}
				wantWS, wantRoute, wantErr := curly.SelectRoute(services, req)
				gotWS, gotRoute, gotErr := ours.SelectRoute(services, req)
				if want, got := describeRoute(wantWS, wantRoute, wantErr), describeRoute(gotWS, gotRoute, gotErr); got != want {
					t.Errorf("%s %q (Content-Type %q, Accept %q):\n got %s\nwant %s", method, path,
						req.Header.Get("Content-Type"), req.Header.Get("Accept"), got, want)
				}
				compared++
			}
		}
	}
	t.Logf("%d requests compared over %d routes' paths", compared, len(paths))
}

func describeRoute(ws *restful.WebService, r *restful.Route, err error) string {
	s := "no service"
	if ws != nil {
		s = "service " + ws.RootPath()
	}
	if r != nil {
		s += fmt.Sprintf(", route %s %s %s", r.Method, r.Path, r.Operation)
	}
	if err != nil {
		s += fmt.Sprintf(", error %q", err.Error())
		if se, ok := err.(restful.ServiceError); ok {
			s += fmt.Sprintf(" %d %v", se.Code, se.Header)
		}
	}
	return s
}
