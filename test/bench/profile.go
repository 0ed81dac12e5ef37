package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// counters are the request, etcd and watch counters of the server's
// /metrics, summed per key (what a figure per pod is made of).
type counters map[string]float64

// Only the counters the per-pod figures need are kept.
var (
	metricLine   = regexp.MustCompile(`^(apiserver_request_total|etcd_requests_total|apiserver_watch_events_total|draplane_apiserver_write_requests_total)\{(.*)\} ([0-9.e+]+)$`)
	metricLabels = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// scrapeCounters reads /metrics and keeps, per request verb and resource
// (and code, when it is not a success), the API requests; per etcd operation, the etcd requests; per resource,
// the watch events the server sent.
func scrapeCounters(ctx context.Context, s *server) (counters, error) {
	raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	out := counters{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := metricLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range metricLabels.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		value, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		resource := labels["resource"]
		if labels["subresource"] != "" {
			resource += "/" + labels["subresource"]
		}
		switch m[1] {
		case "apiserver_request_total":
			// A request the server refused (a conflict, say) is shown
			// apart, with its code: it is a retry, not a write.
			if code := labels["code"]; code != "" && code[0] != '2' {
				resource += " " + code
			}
			out["api "+labels["verb"]+" "+resource] += value
		case "etcd_requests_total":
			out["etcd "+labels["operation"]+" "+resource] += value
		case "apiserver_watch_events_total":
			out["watch "+resource] += value
		case "draplane_apiserver_write_requests_total":
			out["writers "+labels["writer"]] += value
		}
	}
	return out, nil
}

// reportPerPod prints what changed between two scrapes, per pod: API
// writes (and reads), etcd requests and watch events sent, each in total
// and by key.
func reportPerPod(before, after counters, pods int) {
	groups := map[string][]string{}
	totals := map[string]float64{}
	for key, value := range after {
		delta := value - before[key]
		if delta <= 0 {
			continue
		}
		kind := key[:strings.Index(key, " ")]
		if kind == "api" {
			verb := strings.Fields(key)[1]
			switch verb {
			case "GET", "LIST", "WATCH":
				kind = "api reads"
			default:
				kind = "api writes"
			}
		}
		totals[kind] += delta
		groups[kind] = append(groups[kind], fmt.Sprintf("%s %.2f", strings.SplitN(key, " ", 2)[1], delta/float64(pods)))
	}
	for _, kind := range []string{"api writes", "writers", "api reads", "etcd", "watch"} {
		sort.Strings(groups[kind])
		if kind == "writers" {
			// The same writes as "api writes", by who made them: the
			// control plane's own (target: upstream's minimum, 5), the
			// client's create and the simulated kubelet's status.
			report("api writes per pod by writer",
				fmt.Sprintf("%s (of %.2f)", strings.Join(groups[kind], ", "), totals[kind]/float64(pods)))
			continue
		}
		report(fmt.Sprintf("%s per pod during the pods phase", kind),
			fmt.Sprintf("%.2f (%s)", totals[kind]/float64(pods), strings.Join(groups[kind], ", ")))
	}
}

// profiler saves the server's pprof profiles into a directory when one is
// given (-profile-dir); without it, it does nothing.
type profiler struct {
	dir     string
	seconds int
}

// cpu starts a CPU profile of p.seconds in the background and returns a
// function that waits for it and reports where it went.
func (p profiler) cpu(ctx context.Context, s *server, name string) func() {
	if p.dir == "" {
		return func() {}
	}
	done := make(chan error, 1)
	go func() {
		raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(p.seconds)).Timeout(time.Duration(p.seconds+60) * time.Second).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(p.dir, name), raw, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			report("CPU profile "+name, "failed: "+err.Error())
			return
		}
		report("CPU profile ("+strconv.Itoa(p.seconds)+"s)", filepath.Join(p.dir, name))
	}
}

// heap saves a heap profile taken after a garbage collection.
func (p profiler) heap(ctx context.Context, s *server, name string) {
	if p.dir == "" {
		return
	}
	raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
	if err == nil {
		err = os.WriteFile(filepath.Join(p.dir, name), raw, 0o644)
	}
	if err != nil {
		report("heap profile "+name, "failed: "+err.Error())
		return
	}
	report("heap profile", filepath.Join(p.dir, name))
}
