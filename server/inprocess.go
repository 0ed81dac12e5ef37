package server

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// inProcessConfig is loopback (the server's own client config) with its
// requests served by handler, the server's full handler chain, inside the
// process: no TCP connection, TLS or HTTP/2 framing between the server and
// the clients that run in it (controllers, simulator, resourcepools
// informers). Authentication, authorization, admission and everything else
// in the chain apply as they do over the network: the loopback token still
// travels in the Authorization header.
func inProcessConfig(loopback *rest.Config, handler http.Handler) *rest.Config {
	config := rest.CopyConfig(loopback)
	// A custom transport may not carry TLS settings; nothing is dialed.
	config.TLSClientConfig = rest.TLSClientConfig{}
	config.Transport = &inProcessTransport{handler: handler}
	return config
}

// inProcessTransport is an http.RoundTripper that calls an http.Handler.
// The handler runs in a goroutine of its own and writes the response body
// into a pipe the client reads, so watches stream as they do on a
// connection; the client's request context cancels the request.
type inProcessTransport struct {
	handler http.Handler
}

func (t *inProcessTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, pipe := io.Pipe()
	w := newPipeResponseWriter(pipe, req)
	serverReq := req.Clone(req.Context())
	serverReq.RequestURI = req.URL.RequestURI()
	serverReq.RemoteAddr = "127.0.0.1:0"
	serverReq.Host = req.URL.Host
	if serverReq.Body == nil {
		serverReq.Body = http.NoBody
	}
	go t.serve(w, serverReq)
	<-w.started
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// serve runs the handler as net/http's server would: a panic ends only
// this request (the client reads an error, as from a reset connection),
// and a response nobody wrote is a 200 with an empty body.
func (t *inProcessTransport) serve(w *pipeResponseWriter, req *http.Request) {
	defer close(w.done)
	defer func() {
		if r := recover(); r != nil {
			if r != http.ErrAbortHandler {
				klog.Background().Error(nil, "Panic serving an in-process request", "method", req.Method, "uri", req.RequestURI, "panic", r)
			}
			w.WriteHeader(http.StatusInternalServerError)
			_ = w.pipe.CloseWithError(fmt.Errorf("in-process request aborted: %v", r))
			return
		}
		w.WriteHeader(http.StatusOK)
		_ = w.pipe.Close()
	}()
	t.handler.ServeHTTP(w, req)
}

// pipeResponseWriter is the handler's http.ResponseWriter: the status
// and headers are handed to RoundTrip on the first WriteHeader, Write or
// Flush, the body goes into the pipe. It is a Flusher and a CloseNotifier
// so that the server's filters pass flushes of watch events through.
type pipeResponseWriter struct {
	pipe    *io.PipeWriter
	req     *http.Request
	header  http.Header
	sent    http.Header
	code    int
	once    sync.Once
	started chan struct{}
	done    chan struct{}
}

func newPipeResponseWriter(pipe *io.PipeWriter, req *http.Request) *pipeResponseWriter {
	return &pipeResponseWriter{pipe: pipe, req: req, header: http.Header{}, started: make(chan struct{}), done: make(chan struct{})}
}

func (w *pipeResponseWriter) Header() http.Header { return w.header }

func (w *pipeResponseWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.started)
	})
}

func (w *pipeResponseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pipe.Write(p)
}

// Flush only sends the headers: a Write blocks until the client has read
// it, so nothing is ever buffered.
func (w *pipeResponseWriter) Flush() { w.WriteHeader(http.StatusOK) }

// CloseNotify reports the client going away (its request context ending)
// while the handler runs.
func (w *pipeResponseWriter) CloseNotify() <-chan bool {
	gone := make(chan bool, 1)
	go func() {
		select {
		case <-w.req.Context().Done():
			gone <- true
		case <-w.done:
		}
	}()
	return gone
}
