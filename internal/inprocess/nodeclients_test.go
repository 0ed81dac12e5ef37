package inprocess

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/draplane/draplane/internal/auth/nodetoken"
)

// TestNodeClients: a simulated node's requests carry its own identity
// (user draplane:node:<node>, groups draplane:nodes and
// draplane:driver:<driver>), which the server authorizes and admits as
// that node, not the loopback client's: as a token of the node's identity
// minted from the loopback token, or, when the loopback config has no
// token, by impersonating the node.
func TestNodeClients(t *testing.T) {
	const (
		node       = "sim-node-3"
		driver     = "gpu.sim.example.com"
		wantUser   = "draplane:node:sim-node-3"
		nodesGroup = "draplane:nodes"
		driverGrp  = "draplane:driver:gpu.sim.example.com"
	)
	for _, tc := range []struct {
		name     string
		loopback string
	}{
		{name: "token", loopback: "loopback-token"},
		{name: "impersonation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authn := nodetoken.NewAuthenticator(tc.loopback)
			var mu sync.Mutex
			var users []string
			var groups [][]string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				if r.Header.Get("Impersonate-User") != "" {
					users = append(users, r.Header.Get("Impersonate-User"))
					groups = append(groups, append(r.Header.Values("Impersonate-Group"), "system:authenticated"))
				} else if resp, ok, _ := authn.AuthenticateRequest(r); ok {
					users = append(users, resp.User.GetName())
					groups = append(groups, resp.User.GetGroups())
				} else {
					users = append(users, "")
					groups = append(groups, nil)
				}
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			}))
			defer srv.Close()
			c := NewNodeClients(&rest.Config{Host: srv.URL, BearerToken: tc.loopback}, driver)
			kube, resource := c.Get(node)
			_, _ = kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
			_, _ = resource.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
			if again, _ := c.Get(node); again != kube {
				t.Error("a node's clients are made anew on each call")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(users) != 2 {
				t.Fatalf("%d requests, want 2", len(users))
			}
			want := []string{nodesGroup, driverGrp, "system:authenticated"}
			for i := range users {
				if users[i] != wantUser || !slices.Equal(groups[i], want) {
					t.Errorf("request %d as %q in %q, want %s in %q", i, users[i], groups[i], wantUser, want)
				}
			}
		})
	}
}
