package server

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/inprocess"
	"github.com/draplane/draplane/internal/server/gopool"
)

// InProcess carries the requests of the clients inside the process to the
// server's handler, and holds the informers they all share. It exists
// before the server does: core-lite, built with the server's config, asks
// for its informers then. Informers send requests only once the server
// runs, and New sets the handler before that; a request that comes
// earlier is answered 503.
type InProcess struct {
	handler   atomic.Pointer[http.Handler]
	informers inprocess.SharedInformers
	// direct serves the shared informers' lists and watches of the
	// server's own objects; New gives it the stores.
	direct directSource
}

// NewInProcess returns an InProcess whose handler and stores New sets.
func NewInProcess() *InProcess {
	p := &InProcess{}
	p.informers.Direct = &p.direct
	return p
}

func (p *InProcess) setHandler(h http.Handler) { p.handler.Store(&h) }

func (p *InProcess) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	h := p.handler.Load()
	if h == nil {
		http.Error(w, "the server is not built yet", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, req)
}

// WatchHost makes the process's shared informers watch a host cluster's
// pods, nodes and resource.k8s.io objects instead of this server's (cluster
// mode). Call it before the first Informers.
func (p *InProcess) WatchHost(host *rest.Config) { p.informers.Host = host }

// Informers returns the process's shared informers, on loopback's
// credentials and served in process. The first call creates them; later
// calls return the same ones.
func (p *InProcess) Informers(loopback *rest.Config) (*inprocess.Informers, error) {
	return p.informers.Get(inProcessConfig(loopback, p))
}

// Source is where the shared informers list and watch the server's own
// objects (inprocess.DirectResources), once New has given it the stores.
func (p *InProcess) Source() inprocess.Source { return &p.direct }

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
// into a buffered pipe the client reads, so watches stream as they do on a
// connection; the client's request context cancels the request.
type inProcessTransport struct {
	handler http.Handler
}

func (t *inProcessTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pipe := newBufferedPipe(maxBufferedResponse)
	w := newPipeResponseWriter(pipe, req)
	serverReq := req.Clone(req.Context())
	serverReq.RequestURI = req.URL.RequestURI()
	serverReq.RemoteAddr = "127.0.0.1:0"
	serverReq.Host = req.URL.Host
	if serverReq.Body == nil {
		serverReq.Body = http.NoBody
	}
	inProcessServers.Run(func() { t.serve(w, serverReq) })
	<-w.started
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pipe,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// inProcessServers serve the in-process requests of every transport.
var inProcessServers = gopool.New(10 * time.Second)

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
			w.pipe.closeWrite(fmt.Errorf("in-process request aborted: %v", r))
			return
		}
		w.WriteHeader(http.StatusOK)
		w.pipe.closeWrite(io.EOF)
	}()
	t.handler.ServeHTTP(w, req)
}

// pipeResponseWriter is the handler's http.ResponseWriter: the status
// and headers are handed to RoundTrip on the first WriteHeader, Write or
// Flush, the body goes into the pipe. It is a Flusher and a CloseNotifier
// so that the server's filters pass flushes of watch events through.
type pipeResponseWriter struct {
	pipe    *bufferedPipe
	req     *http.Request
	header  http.Header
	sent    http.Header
	code    int
	once    sync.Once
	started chan struct{}
	done    chan struct{}
}

func newPipeResponseWriter(pipe *bufferedPipe, req *http.Request) *pipeResponseWriter {
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

// Flush only sends the headers: what was written is already readable.
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

// maxBufferedResponse is how much of a response the handler may write
// ahead of the client, as a connection's socket buffers and HTTP/2 window
// would let it: a watch handler is not held up by each event's decoding in
// the client (the watch cache drops watchers that fall behind).
const maxBufferedResponse = 4 << 20

// bufferedPipe carries a response body from the handler to the client:
// writes block only while max bytes are unread; reads block until there is
// data or the writer has closed. The client closing the body makes further
// writes fail, as a closed connection would.
type bufferedPipe struct {
	mu       sync.Mutex
	cond     *sync.Cond
	buf      []byte
	max      int
	writeErr error // set by closeWrite: what reads return once buf is empty
	readErr  error // set by Close: what writes return
}

func newBufferedPipe(max int) *bufferedPipe {
	p := &bufferedPipe{max: max}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *bufferedPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	written := 0
	for len(b) > 0 {
		for p.readErr == nil && p.writeErr == nil && len(p.buf) >= p.max {
			p.cond.Wait()
		}
		if p.readErr != nil {
			return written, p.readErr
		}
		if p.writeErr != nil {
			return written, io.ErrClosedPipe
		}
		n := min(len(b), p.max-len(p.buf))
		p.buf = append(p.buf, b[:n]...)
		b, written = b[n:], written+n
		p.cond.Broadcast()
	}
	return written, nil
}

func (p *bufferedPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 && p.writeErr == nil && p.readErr == nil {
		p.cond.Wait()
	}
	if p.readErr != nil {
		return 0, p.readErr
	}
	if len(p.buf) == 0 {
		return 0, p.writeErr
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	if len(p.buf) == 0 {
		p.buf = nil
	}
	p.cond.Broadcast()
	return n, nil
}

// Close is the client closing the body: the handler's writes fail from
// now on and what was not read is dropped.
func (p *bufferedPipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readErr == nil {
		p.readErr = io.ErrClosedPipe
	}
	p.buf = nil
	p.cond.Broadcast()
	return nil
}

// closeWrite ends the body: reads return err (io.EOF for a complete
// response) once the buffered bytes are read.
func (p *bufferedPipe) closeWrite(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writeErr == nil {
		p.writeErr = err
	}
	p.cond.Broadcast()
}
