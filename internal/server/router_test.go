package server

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
)

// TestRouteSelectorSemantics compares routeSelector with CurlyRouter on
// web services made to tell their rules apart (the server's own routes
// are compared in cmd/dra-apiserver/app): static parts before
// parameters, more parameters before fewer, then the path; the best root
// path; conditions; the method, content type and accepted types with
// their errors; and the services it leaves to CurlyRouter.
func TestRouteSelectorSemantics(t *testing.T) {
	noop := func(*restful.Request, *restful.Response) {}
	service := func(root string, routes ...*restful.RouteBuilder) *restful.WebService {
		ws := new(restful.WebService).Path(root)
		for _, r := range routes {
			ws.Route(r.To(noop))
		}
		return ws
	}
	json := []string{"application/json", "application/yaml"}
	notOnTuesdays := func(r *http.Request) bool { return r.Header.Get("X-Day") != "tuesday" }
	plain := []*restful.WebService{
		service("/a",
			new(restful.WebService).GET("/a/{x}/b").Operation("getXB").Produces(json...),
			new(restful.WebService).GET("/a/c/{y}").Operation("getCY").Produces(json...),
			new(restful.WebService).GET("/a/c/b").Operation("getCB").Produces("application/json"),
			new(restful.WebService).GET("/a/{x}/{y}").Operation("getXY").Produces("*/*"),
			new(restful.WebService).PUT("/a/{x}/{y}").Operation("putXY").Consumes(json...).Produces(json...),
			new(restful.WebService).PUT("/a/{z}/{y}").Operation("putZY").Consumes("text/plain").Produces(json...),
			new(restful.WebService).DELETE("/a/{x}/{y}").Operation("deleteXY").Consumes(json...),
			new(restful.WebService).POST("/a/{x}").Operation("postX").Consumes(json...).Produces(json...).If(notOnTuesdays),
			new(restful.WebService).POST("/a/{x}").Operation("postX2").Consumes(json...).Produces("text/plain"),
			new(restful.WebService).GET("/a").Operation("getA"),
			new(restful.WebService).GET("/a/").Operation("getASlash"),
		),
		service("/a/c", new(restful.WebService).GET("/a/c/{y}/d").Operation("getCYD")),
		service("/o", new(restful.WebService).POST("/o").Operation("postO").Consumes("application/octet-stream")),
		service("/{p}", new(restful.WebService).GET("/{p}/q").Operation("getPQ")),
		service("/"),
	}
	regex := append([]*restful.WebService{service("/r", new(restful.WebService).GET("/r/{n:[0-9]+}").Operation("getN"))}, plain...)
	regexRoot := append(append([]*restful.WebService(nil), plain...), service("/{n:[0-9]+}", new(restful.WebService).GET("/{w}/q").Operation("getWQ")))
	noContentType := append([]*restful.WebService{service("/m",
		new(restful.WebService).POST("/m").Operation("postM").Consumes(json...).AllowedMethodsWithoutContentType([]string{"POST"}))}, plain...)

	parts := []string{"a", "b", "c", "d", "q", "r", "m", "o", "", "1", "x"}
	methods := []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, "BREW"}
	contentTypes := []string{"", "application/json", "text/plain", "application/yaml; charset=utf-8", "image/png, text/plain", "application/octet-stream"}
	accepts := []string{"", "*/*", "application/json", "text/plain", "image/png", "image/png;q=1, application/yaml", " application/json "}
	days := []string{"", "tuesday"}
	rng := rand.New(rand.NewPCG(7, 8))
	ours := newRouteSelector()
	for name, services := range map[string][]*restful.WebService{"plain": plain, "regex": regex, "regex root": regexRoot, "without content type": noContentType} {
		for range 20000 {
			path := ""
			for range rng.IntN(5) {
				path += "/" + parts[rng.IntN(len(parts))]
			}
			if rng.IntN(4) == 0 {
				path += "/"
			}
			if path == "" {
				path = "/"
			}
			req := &http.Request{Method: methods[rng.IntN(len(methods))], URL: &url.URL{Path: path}, Header: http.Header{}}
			for header, values := range map[string][]string{"Content-Type": contentTypes, "Accept": accepts, "X-Day": days} {
				if v := values[rng.IntN(len(values))]; v != "" {
					req.Header.Set(header, v)
				}
			}
			wantWS, wantRoute, wantErr := restful.CurlyRouter{}.SelectRoute(services, req)
			gotWS, gotRoute, gotErr := ours.SelectRoute(services, req)
			if got, want := describe(gotWS, gotRoute, gotErr), describe(wantWS, wantRoute, wantErr); got != want {
				t.Errorf("%s: %s %q %v:\n got %s\nwant %s", name, req.Method, path, req.Header, got, want)
			}
		}
	}
}

func describe(ws *restful.WebService, r *restful.Route, err error) string {
	var s []string
	if ws != nil {
		s = append(s, "service "+ws.RootPath())
	}
	if r != nil {
		s = append(s, "route "+r.Operation)
	}
	if err != nil {
		s = append(s, fmt.Sprintf("error %q", err.Error()))
		if se, ok := err.(restful.ServiceError); ok {
			s = append(s, fmt.Sprintf("%d %v", se.Code, se.Header))
		}
	}
	return strings.Join(s, ", ")
}
