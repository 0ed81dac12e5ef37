package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestInProcessTransport: requests reach the handler with their headers
// and body, responses come back with status and headers, streamed bodies
// arrive line by line before the handler returns, the client's cancel
// reaches the handler, and a panic ends only its request with an error.
func TestInProcessTransport(t *testing.T) {
	release := make(chan struct{})
	cancelled := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(r.Method + " " + r.RequestURI + " " + string(body)))
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("first\n"))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte("second\n"))
	})
	mux.HandleFunc("/wait", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(time.Minute):
		}
	})
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("partial"))
		panic("boom")
	})
	mux.HandleFunc("/nothing", func(http.ResponseWriter, *http.Request) {})
	wroteAhead := make(chan struct{})
	mux.HandleFunc("/ahead", func(w http.ResponseWriter, r *http.Request) {
		for range 1000 {
			_, _ = w.Write([]byte("event\n"))
			w.(http.Flusher).Flush()
		}
		close(wroteAhead)
	})

	config := inProcessConfig(&rest.Config{Host: "https://127.0.0.1:1", BearerToken: "token",
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not used")}}, mux)
	client, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatalf("client for the in-process config: %v", err)
	}
	do := func(ctx context.Context, method, path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, config.Host+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return client.Do(req)
	}
	ctx := context.Background()

	t.Run("request and response", func(t *testing.T) {
		resp, err := do(ctx, http.MethodPost, "/echo?x=1", "hello")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated || string(got) != "POST /echo?x=1 hello" || resp.Header.Get("X-Auth") != "Bearer token" {
			t.Errorf("got %d %q X-Auth=%q", resp.StatusCode, got, resp.Header.Get("X-Auth"))
		}
	})
	t.Run("streamed body", func(t *testing.T) {
		resp, err := do(ctx, http.MethodGet, "/stream", "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := bufio.NewReader(resp.Body)
		if line, err := lines.ReadString('\n'); err != nil || line != "first\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		close(release)
		if line, err := lines.ReadString('\n'); err != nil || line != "second\n" {
			t.Fatalf("second line %q, %v", line, err)
		}
	})
	t.Run("handler writes ahead of the client", func(t *testing.T) {
		resp, err := do(ctx, http.MethodGet, "/ahead", "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		select {
		case <-wroteAhead:
		case <-time.After(30 * time.Second):
			t.Fatal("the handler was held up by a client that did not read yet")
		}
		if got, err := io.ReadAll(resp.Body); err != nil || strings.Count(string(got), "event\n") != 1000 {
			t.Errorf("read %d events, %v", strings.Count(string(got), "event\n"), err)
		}
	})
	t.Run("cancel reaches the handler", func(t *testing.T) {
		reqCtx, cancel := context.WithCancel(ctx)
		resp, err := do(reqCtx, http.MethodGet, "/wait", "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		cancel()
		select {
		case <-cancelled:
		case <-time.After(30 * time.Second):
			t.Fatal("the handler did not see the request cancelled")
		}
	})
	t.Run("panic", func(t *testing.T) {
		resp, err := do(ctx, http.MethodGet, "/panic", "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Error("reading the body of a request whose handler panicked: no error")
		}
	})
	t.Run("empty response", func(t *testing.T) {
		resp, err := do(ctx, http.MethodGet, "/nothing", "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if got, err := io.ReadAll(resp.Body); err != nil || resp.StatusCode != http.StatusOK || len(got) != 0 {
			t.Errorf("got %d %q %v", resp.StatusCode, got, err)
		}
	})
}
