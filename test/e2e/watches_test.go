package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestInProcessWatchesOnce: everything inside the process that watches a
// resource (the controllers, the simulator, core-lite's admission and
// authorizers, the resourcepools view) reads the process's shared
// informers, so the server serves one watch of each resource, however
// many in-process users it has. Core-lite once had informers of its own:
// a second watch of pods, claims and namespaces, over the network
// loopback, decoded from JSON and cached a second time. The informers of
// the server's own objects watch its stores, past the API handlers
// (draplane_apiserver_inprocess_watches); the RBAC informers watch
// through the handlers (apiserver_longrunning_requests).
func TestInProcessWatchesOnce(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=2")
	resources := []string{"pods", "resourceclaims", "namespaces", "nodes", "clusterroles", "rolebindings", "priorityclasses"}
	watches := map[string]int{}
	// The informers start in post-start hooks, and a watch is reopened
	// now and then: wait until each resource has exactly one. With a
	// second informer of a resource its count stays at 2.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		watches = openWatches(s.MustKubectl(t, "", "get", "--raw", "/metrics"))
		for _, resource := range resources {
			if watches[resource] != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, resource := range resources {
			if got := watches[resource]; got != 1 {
				t.Errorf("%d watches of %s open, want 1", got, resource)
			}
		}
		t.Fatalf("open watches by resource: %v", watches)
	}
}

// openWatches sums apiserver_longrunning_requests for verb WATCH and
// draplane_apiserver_inprocess_watches by resource, from the server's
// /metrics text.
func openWatches(metrics string) map[string]int {
	open := map[string]int{}
	for _, line := range strings.Split(metrics, "\n") {
		var rest string
		if r, ok := strings.CutPrefix(line, "apiserver_longrunning_requests{"); ok && strings.Contains(line, `verb="WATCH"`) {
			rest = r
		} else if r, ok := strings.CutPrefix(line, "draplane_apiserver_inprocess_watches{"); ok {
			rest = r
		} else {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		for _, label := range strings.Split(labels, ",") {
			if resource, ok := strings.CutPrefix(label, "resource="); ok {
				open[strings.Trim(resource, `"`)] += int(n)
			}
		}
	}
	return open
}
