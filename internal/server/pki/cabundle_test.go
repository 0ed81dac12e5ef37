package pki

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// fakeHost answers APIService patches as a kube-apiserver does, keeping
// the caBundle of each, and refuses those it is told to.
type fakeHost struct {
	mu        sync.Mutex
	bundles   map[string][]byte
	forbidden map[string]bool
	requests  []string
	patched   chan string
}

func (h *fakeHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+r.URL.Query().Get("fieldManager"))
	name, ok := strings.CutPrefix(r.URL.Path, "/apis/apiregistration.k8s.io/v1/apiservices/")
	if r.Method != http.MethodPatch || !ok {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if h.forbidden[name] {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`)
		return
	}
	var patch struct {
		Spec struct {
			CABundle []byte `json:"caBundle"`
		} `json:"spec"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &patch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.bundles[name] = patch.Spec.CABundle
	io.WriteString(w, `{"kind":"APIService","apiVersion":"apiregistration.k8s.io/v1","metadata":{"name":"`+name+`"}}`)
	select {
	case h.patched <- name:
	default:
	}
}

func (h *fakeHost) bundle(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.bundles[name])
}

func TestCABundleInjector(t *testing.T) {
	names := []string{"v1.resource.draplane.dev", "v1beta1.resource.draplane.dev"}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeCA := func(pem string) {
		if err := os.WriteFile(caFile, []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		// before: the CA file at start ("" = missing); forbidden at first.
		before    string
		forbidden bool
	}{
		"CA written at start":        {before: "CA-1"},
		"missing CA file is retried": {before: ""},
		"refused patch is retried":   {before: "CA-1", forbidden: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			os.Remove(caFile)
			if tc.before != "" {
				writeCA(tc.before)
			}
			host := &fakeHost{bundles: map[string][]byte{}, forbidden: map[string]bool{}, patched: make(chan string, 100)}
			if tc.forbidden {
				host.forbidden[names[0]] = true
			}
			srv := httptest.NewServer(host)
			defer srv.Close()
			injector, err := NewCABundleInjector(CABundleConfig{Host: &rest.Config{Host: srv.URL}, APIServices: names, CAFile: caFile,
				Resync: 50 * time.Millisecond, RetryCap: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); injector.Run(ctx) }()
			defer func() { cancel(); <-done }()

			waitFor := func(want string) {
				t.Helper()
				deadline := time.After(time.Minute)
				for host.bundle(names[0]) != want || host.bundle(names[1]) != want {
					select {
					case <-deadline:
						t.Fatalf("caBundles %q, %q, want %q", host.bundle(names[0]), host.bundle(names[1]), want)
					case <-host.patched:
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
			if tc.before == "" {
				writeCA("CA-1")
			}
			if tc.forbidden {
				// Nothing is written while refused; then it is.
				time.Sleep(200 * time.Millisecond)
				if got := host.bundle(names[0]); got != "" {
					t.Errorf("caBundle written although refused: %q", got)
				}
				host.mu.Lock()
				host.forbidden = map[string]bool{}
				host.mu.Unlock()
			}
			waitFor("CA-1")
			// A replaced CA reaches the APIServices.
			writeCA("CA-2")
			waitFor("CA-2")

			host.mu.Lock()
			defer host.mu.Unlock()
			for _, r := range host.requests {
				if !strings.HasPrefix(r, "PATCH /apis/apiregistration.k8s.io/v1/apiservices/") || !strings.HasSuffix(r, " application/merge-patch+json "+CABundleFieldManager) {
					t.Errorf("unexpected request %q: want a JSON merge patch of an APIService by field manager %s", r, CABundleFieldManager)
				}
			}
		})
	}
}
