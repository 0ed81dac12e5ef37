package server

import (
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
)

// routeSelector picks the route of a request as go-restful's CurlyRouter
// does, which the API server's handlers are installed with, without its
// allocations: CurlyRouter copies every route whose path matches the
// request (a Route is a large struct) into a list it sorts, copies the
// list again, and splits the path into new strings, for every request
// (the bench output shows the bytes allocated per placed pod).
//
// It keeps each web service's routes, with their paths split, from the
// first request that reaches the service; the API server installs every
// route before it serves. Services whose routes it does not handle the
// same way (regular expressions, wildcards or custom verbs in paths,
// AllowedMethodsWithoutContentType), and paths of more than maxTokens
// parts, go to CurlyRouter itself.
type routeSelector struct {
	curly    restful.CurlyRouter
	services sync.Map // *restful.WebService -> *serviceRoutes
}

func newRouteSelector() *routeSelector { return &routeSelector{} }

// maxTokens is the most path parts a request may have for routeSelector to
// match it.
const maxTokens = 24

type serviceRoutes struct {
	// curly: CurlyRouter decides for this service.
	curly  bool
	root   []string
	routes []restful.Route
	// parts are each route's path split.
	parts [][]string
}

func (s *routeSelector) service(ws *restful.WebService) *serviceRoutes {
	if r, ok := s.services.Load(ws); ok {
		return r.(*serviceRoutes)
	}
	r := &serviceRoutes{routes: ws.Routes()}
	var ok bool
	if r.root, ok = splitPath(ws.RootPath()); !ok {
		r.curly = true
	}
	for _, token := range r.root {
		r.curly = r.curly || strings.Contains(token, ":")
	}
	for i := range r.routes {
		route := &r.routes[i]
		parts, ok := splitPath(route.Path)
		r.parts = append(r.parts, parts)
		r.curly = r.curly || !ok || strings.Contains(route.Path, ":") || !plainContentTypes(route)
	}
	actual, _ := s.services.LoadOrStore(ws, r)
	return actual.(*serviceRoutes)
}

// plainContentTypes reports whether a route takes requests without a
// Content-Type for go-restful's default methods only: it has no
// AllowedMethodsWithoutContentType (an unexported field; a go-restful
// without it makes every service CurlyRouter's).
func plainContentTypes(route *restful.Route) bool {
	f := reflect.ValueOf(route).Elem().FieldByName("allowedMethodsWithoutContentType")
	return f.IsValid() && f.Kind() == reflect.Slice && f.Len() == 0
}

// splitPath is go-restful's tokenizePath for paths of at most maxTokens
// parts; ok is false for longer ones.
func splitPath(path string) (parts []string, ok bool) {
	var buf [maxTokens]string
	n, ok := splitPathInto(path, &buf)
	return append([]string(nil), buf[:n]...), ok
}

// splitPathInto is go-restful's tokenizePath into tokens, without
// allocating; ok is false when the path has more than len(tokens) parts.
func splitPathInto(path string, tokens *[maxTokens]string) (n int, ok bool) {
	if path == "/" {
		return 0, true
	}
	if restful.TrimRightSlashEnabled {
		path = strings.Trim(path, "/")
	} else {
		path = strings.TrimLeft(path, "/")
	}
	for {
		if n == len(tokens) {
			return 0, false
		}
		i := strings.IndexByte(path, '/')
		if i < 0 {
			tokens[n] = path
			return n + 1, true
		}
		tokens[n] = path[:i]
		path = path[i+1:]
		n++
	}
}

func (s *routeSelector) SelectRoute(webServices []*restful.WebService, req *http.Request) (*restful.WebService, *restful.Route, error) {
	var buf [maxTokens]string
	n, ok := splitPathInto(req.URL.Path, &buf)
	if !ok {
		return s.curly.SelectRoute(webServices, req)
	}
	tokens := buf[:n]

	// The service whose root path scores best, the first of equals.
	var best *restful.WebService
	var bestRoutes *serviceRoutes
	score := -1
	for _, ws := range webServices {
		r := s.service(ws)
		if r.curly {
			return s.curly.SelectRoute(webServices, req)
		}
		if matches, wsScore := rootScore(tokens, r.root); matches && wsScore > score {
			best, bestRoutes, score = ws, r, wsScore
		}
	}
	if best == nil {
		return nil, nil, restful.NewError(http.StatusNotFound, "404: Page Not Found")
	}

	// Its routes whose path matches, most static parts first, then most
	// parameters, then by path: CurlyRouter's order, sorted by the same
	// algorithm so that equal routes end up in the same order.
	var candidateBuf [16]candidateRoute
	candidates := candidateRoutes(candidateBuf[:0])
	for i, parts := range bestRoutes.parts {
		if len(parts) != len(tokens) {
			continue
		}
		static, params := 0, 0
		for j, part := range parts {
			if strings.HasPrefix(part, "{") {
				params++
			} else if part == tokens[j] {
				static++
			} else {
				static = -1
				break
			}
		}
		if static >= 0 {
			candidates = append(candidates, candidateRoute{route: &bestRoutes.routes[i], params: params, static: static})
		}
	}
	if len(candidates) == 0 {
		return best, nil, restful.NewError(http.StatusNotFound, "404: Page Not Found")
	}
	sort.Sort(candidates)
	route, err := detectRoute(candidates, req)
	if route == nil {
		return best, nil, err
	}
	return best, route, nil
}

// rootScore is CurlyRouter's computeWebserviceScore for root paths
// without regular expressions.
func rootScore(tokens, root []string) (bool, int) {
	if len(root) > len(tokens) {
		return false, 0
	}
	score := 0
	for i, part := range root {
		token := tokens[i]
		switch {
		case token == "" && part == "":
			score++
		case strings.HasPrefix(part, "{"):
			if token == "" {
				return false, score
			}
			score++
		case token != part:
			return false, score
		default:
			score += (len(root) - i) * 10
		}
	}
	return true, score
}

type candidateRoute struct {
	route          *restful.Route
	params, static int
}

// candidateRoutes sorts as go-restful's sortableCurlyRoutes does.
type candidateRoutes []candidateRoute

func (s candidateRoutes) Len() int      { return len(s) }
func (s candidateRoutes) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s candidateRoutes) Less(i, j int) bool {
	a, b := s[j], s[i]
	if a.static != b.static {
		return a.static < b.static
	}
	if a.params != b.params {
		return a.params < b.params
	}
	return a.route.Path < b.route.Path
}

// detectRoute is go-restful's RouterJSR311.detectRoute: the first route
// whose conditions hold, then of those the ones for the method, the
// content type and the accepted types, with its errors when none is left.
func detectRoute(candidates candidateRoutes, req *http.Request) (*restful.Route, error) {
	var buf [16]*restful.Route
	routes := buf[:0]
	for _, c := range candidates {
		ok := true
		for _, f := range c.route.If {
			if !f(req) {
				ok = false
				break
			}
		}
		if ok {
			routes = append(routes, c.route)
		}
	}
	if len(routes) == 0 {
		return nil, restful.NewError(http.StatusNotFound, "404: Not Found")
	}

	previous := routes
	routes = filterRoutes(previous, func(r *restful.Route) bool { return r.Method == req.Method })
	if len(routes) == 0 {
		var allowed []string
		for _, r := range previous {
			if !slices.Contains(allowed, r.Method) {
				allowed = append(allowed, r.Method)
			}
		}
		return nil, restful.NewErrorWithHeader(http.StatusMethodNotAllowed, "405: Method Not Allowed",
			http.Header{"Allow": []string{strings.Join(allowed, ", ")}})
	}

	contentType := req.Header.Get(restful.HEADER_ContentType)
	previous = routes
	routes = filterRoutes(previous, func(r *restful.Route) bool { return consumes(r, contentType) })
	if len(routes) == 0 {
		return nil, restful.NewError(http.StatusUnsupportedMediaType, "415: Unsupported Media Type")
	}

	accept := req.Header.Get(restful.HEADER_Accept)
	if accept == "" {
		accept = "*/*"
	}
	previous = routes
	routes = filterRoutes(previous, func(r *restful.Route) bool { return produces(r, accept) })
	if len(routes) == 0 {
		var available []string
		for _, r := range previous {
			available = append(available, r.Produces...)
		}
		return nil, restful.NewError(http.StatusNotAcceptable,
			"406: Not Acceptable\n\nAvailable representations: "+strings.Join(available, ", "))
	}
	return routes[0], nil
}

// filterRoutes keeps the routes keep says yes to, in place, as
// detectRoute does: when it keeps none, routes is left as it was (the
// errors list what it held).
func filterRoutes(routes []*restful.Route, keep func(*restful.Route) bool) []*restful.Route {
	out := routes[:0]
	for _, r := range routes {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// eachMediaType calls f with each media type of a header value, without
// parameters and surrounding spaces, until f returns true.
func eachMediaType(value string, f func(string) bool) bool {
	for {
		var mimeType string
		if end := strings.IndexByte(value, ','); end == -1 {
			mimeType, value = value, ""
		} else {
			mimeType, value = value[:end], value[end+1:]
		}
		if quality := strings.IndexByte(mimeType, ';'); quality != -1 {
			mimeType = mimeType[:quality]
		}
		if f(strings.TrimFunc(mimeType, isTrimmedSpace)) {
			return true
		}
		if value == "" {
			return false
		}
	}
}

// isTrimmedSpace is go-restful's stringTrimSpaceCutset.
func isTrimmedSpace(r rune) bool { return r == ' ' }

// produces is Route.matchesAccept.
func produces(r *restful.Route, accept string) bool {
	return eachMediaType(accept, func(mimeType string) bool {
		if mimeType == "*/*" {
			return true
		}
		for _, p := range r.Produces {
			if p == "*/*" || p == mimeType {
				return true
			}
		}
		return false
	})
}

// consumes is Route.matchesContentType for routes without
// AllowedMethodsWithoutContentType.
func consumes(r *restful.Route, contentType string) bool {
	if len(r.Consumes) == 0 {
		return true
	}
	if contentType == "" {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete, http.MethodTrace:
			return true
		}
		contentType = restful.MIME_OCTET
	}
	return eachMediaType(contentType, func(mimeType string) bool {
		for _, c := range r.Consumes {
			if c == "*/*" || c == mimeType {
				return true
			}
		}
		return false
	})
}

// NewRouteSelector returns the route selector the server's API handlers
// are installed with, for tests that compare it with CurlyRouter.
func NewRouteSelector() restful.RouteSelector { return newRouteSelector() }
