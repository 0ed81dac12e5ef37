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
)

// TestNodeClients: a simulated node's requests carry its own identity
// (user draplane:node:<node>, groups draplane:nodes and
// draplane:driver:<driver>), which the server authorizes and admits as
// that node, not the loopback client's.
func TestNodeClients(t *testing.T) {
	var mu sync.Mutex
	var users []string
	var groups [][]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		users = append(users, r.Header.Get("Impersonate-User"))
		groups = append(groups, r.Header.Values("Impersonate-Group"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	c := NewNodeClients(&rest.Config{Host: srv.URL, BearerToken: "loopback"}, "gpu.sim.example.com")
	kube, resource := c.Get("sim-node-3")
	_, _ = kube.CoreV1().Nodes().Get(context.Background(), "sim-node-3", metav1.GetOptions{})
	_, _ = resource.ResourceV1().ResourceClaims("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if again, _ := c.Get("sim-node-3"); again != kube {
		t.Error("a node's clients are made anew on each call")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(users) != 2 {
		t.Fatalf("%d requests, want 2", len(users))
	}
	for i := range users {
		if users[i] != "draplane:node:sim-node-3" || !slices.Equal(groups[i], []string{"draplane:nodes", "draplane:driver:gpu.sim.example.com"}) {
			t.Errorf("request %d as %q in %q, want draplane:node:sim-node-3 in draplane:nodes, draplane:driver:gpu.sim.example.com", i, users[i], groups[i])
		}
	}
}
