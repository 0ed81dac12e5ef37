package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGrafanaDashboard checks that every metric deploy/grafana/draplane.json
// queries is one the server exports: the names in its PromQL expressions
// against the samples of /metrics of a real server after pods were
// placed, left pending and evicted (metrics with labels have no samples
// before their first observation).
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "draplane.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("deploy/grafana/draplane.json: %v", err)
	}
	queried := map[string][]string{} // metric -> panels
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := promQLMetrics(target.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", p.Title, target.Expr)
			}
			for _, n := range names {
				queried[n] = append(queried[n], p.Title)
			}
		}
	}

	s := startServer(t, t.TempDir(), "--simulate-nodes=4")
	// The quickstart's examples place pods, leave one pending and evict
	// two with a NoExecute taint.
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart"))
	s.MustKubectl(t, "", "wait", "--for=condition=Ready", "pod/shared-a", "pod/shared-b", "--timeout=60s")
	s.MustKubectl(t, "", "wait", "--for=condition=PodScheduled=false", "pod/too-big", "--timeout=60s")
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "taint"))
	s.MustKubectl(t, "", "wait", "--for=delete", "pod/shared-a", "pod/shared-b", "--timeout=60s")
	var exported map[string]bool
	deadline := time.Now().Add(time.Minute)
	for {
		exported = sampleNames(s.MustKubectl(t, "", "get", "--raw", "/metrics"))
		var missing []string
		for n := range queried {
			if !exported[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			slices.Sort(missing)
			for _, n := range missing {
				t.Errorf("the dashboard queries %s (panels %q), which the server does not export", n, queried[n])
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var (
	promQLDropped = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\{[^}]*\}|\[[^\]]*\]|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promQLIdent   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promQLWords   = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
)

// promQLMetrics returns the metric names of a PromQL expression: the
// identifiers that are not functions, keywords or inside label matchers,
// ranges, strings or grouping clauses.
func promQLMetrics(expr string) []string {
	expr = promQLDropped.ReplaceAllString(expr, " ")
	var names []string
	for _, m := range promQLIdent.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" || promQLWords[strings.ToLower(m[0])] {
			continue
		}
		names = append(names, m[0])
	}
	return names
}

func TestPromQLMetrics(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, verb) (rate(apiserver_request_duration_seconds_bucket{verb!~"WATCH|CONNECT"}[$__rate_interval])))`: {"apiserver_request_duration_seconds_bucket"},
		`sum by (class) (draplane_deviceclass_devices{state="free"}) / on (class) x_total`:                                                       {"draplane_deviceclass_devices", "x_total"},
		`process_resident_memory_bytes`: {"process_resident_memory_bytes"},
	} {
		if got := promQLMetrics(expr); !slices.Equal(got, want) {
			t.Errorf("promQLMetrics(%q) = %q, want %q", expr, got, want)
		}
	}
}

// sampleNames are the names of the samples of a Prometheus text
// exposition.
func sampleNames(text string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}
