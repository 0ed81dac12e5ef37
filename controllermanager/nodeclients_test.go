package controllermanager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
)

// TestNodeClients: a simulated node's requests carry its own identity
// (user draplane:node:<node>, groups draplane:nodes and
// draplane:driver:<driver>), which the server authorizes and admits as
// that node, not the loopback client's: a token issued for it, or,
// without tokens, impersonation through the loopback client.
func TestNodeClients(t *testing.T) {
	const node, driver = "sim-node-3", "gpu.sim.example.com"
	wantUser, wantGroups := "draplane:node:"+node, []string{"draplane:nodes", "draplane:driver:" + driver}
	for _, tc := range []struct {
		name   string
		tokens *fakeTokens
		check  func(t *testing.T, r *http.Request, tokens *fakeTokens)
	}{
		{
			name:   "token",
			tokens: &fakeTokens{},
			check: func(t *testing.T, r *http.Request, tokens *fakeTokens) {
				if got := r.Header.Get("Authorization"); got != "Bearer token-for-"+wantUser {
					t.Errorf("Authorization %q, want the node's token", got)
				}
				if r.Header.Get("Impersonate-User") != "" {
					t.Error("a request with a token impersonates too")
				}
				if len(tokens.issued) != 1 || tokens.issued[0].GetName() != wantUser || !slices.Equal(tokens.issued[0].GetGroups(), wantGroups) {
					t.Errorf("tokens issued for %v, want one for %s in %v", tokens.issued, wantUser, wantGroups)
				}
			},
		},
		{
			name: "impersonation",
			check: func(t *testing.T, r *http.Request, _ *fakeTokens) {
				if got := r.Header.Get("Authorization"); got != "Bearer loopback" {
					t.Errorf("Authorization %q, want the loopback's", got)
				}
				if user, groups := r.Header.Get("Impersonate-User"), r.Header.Values("Impersonate-Group"); user != wantUser || !slices.Equal(groups, wantGroups) {
					t.Errorf("request as %q in %q, want %s in %v", user, groups, wantUser, wantGroups)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var requests []*http.Request
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests = append(requests, r)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			}))
			defer srv.Close()
			var tokens Tokens
			if tc.tokens != nil {
				tokens = tc.tokens
			}
			c := newNodeClients(&rest.Config{Host: srv.URL, BearerToken: "loopback"}, driver, tokens)
			kube, resource := c.get(node)
			_, _ = kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
			_, _ = resource.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
			if again, _ := c.get(node); again != kube {
				t.Error("a node's clients are made anew on each call")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(requests) != 2 {
				t.Fatalf("%d requests, want 2", len(requests))
			}
			for _, r := range requests {
				tc.check(t, r, tc.tokens)
			}
		})
	}
}

// fakeTokens issue "token-for-<user>" and remember for whom.
type fakeTokens struct {
	issued []user.Info
}

func (f *fakeTokens) Token(u user.Info) string {
	f.issued = append(f.issued, u)
	return "token-for-" + u.GetName()
}
