package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// liveHeap is the server's heap right after a forced garbage collection,
// read from /debug/pprof/heap?gc=1&debug=1: the total from the runtime's
// own count, and the sampled in-use bytes split by who allocated them.
type liveHeap struct {
	// HeapAlloc is runtime.MemStats.HeapAlloc read right after the GC:
	// the live heap, plus what was allocated between the GC and the read.
	HeapAlloc int64
	// Owners are the sampled in-use bytes (scaled for the sampling rate,
	// as pprof scales them) by owner; see owners.
	Owners map[string]int64
	// Sampled is their sum.
	Sampled int64
}

// owners attribute an allocation to the first owner one of whose
// packages appears anywhere in its stack; the order matters: the watch
// cache fills itself through client-go's reflector, and the allocation
// controller runs under informers' event handlers.
var owners = []struct {
	name     string
	packages []string
}{
	// The watch caches hold what their etcd watches decoded: events are
	// decoded in etcd3's watchChan, the initial list under the cacher.
	{"watch caches", []string{"k8s.io/apiserver/pkg/storage/cacher.", "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan)"}},
	// The allocator's own state, also where informers' handlers call it.
	{"allocator", []string{"github.com/draplane/draplane/allocator.", "github.com/draplane/draplane/allocator/", "github.com/draplane/draplane/internal/controllers/allocation."}},
	// Informers hold what their watches decoded in client-go's
	// StreamWatcher and their lists decoded under the reflector.
	{"informers", []string{"k8s.io/client-go/tools/cache.", "k8s.io/client-go/informers.", "github.com/draplane/draplane/generated/informers/",
		"k8s.io/client-go/rest/watch.", "k8s.io/apimachinery/pkg/watch.(*StreamWatcher)"}},
	{"etcd", []string{"go.etcd.io/etcd/", "go.etcd.io/bbolt.", "go.etcd.io/raft/"}},
}

// ownerNames are the owners in report order, "other" last.
func ownerNames() []string {
	names := make([]string, 0, len(owners)+1)
	for _, o := range owners {
		names = append(names, o.name)
	}
	return append(names, "other")
}

func ownerOf(frames []string) string {
	for _, o := range owners {
		for _, frame := range frames {
			for _, p := range o.packages {
				if strings.HasPrefix(frame, p) {
					return o.name
				}
			}
		}
	}
	return "other"
}

// readLiveHeap forces a GC in the server and reads its heap.
func readLiveHeap(ctx context.Context, s *server) (liveHeap, error) {
	raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").Param("debug", "1").Stream(ctx)
	if err != nil {
		return liveHeap{}, fmt.Errorf("read /debug/pprof/heap: %w", err)
	}
	defer raw.Close()
	return parseHeapProfile(raw)
}

// parseHeapProfile reads the text heap profile (debug=1): a header
// "heap profile: N: B [N: B] @ heap/2*rate", records "inuseObjects:
// inuseBytes [allocObjects: allocBytes] @ pcs..." each followed by its
// frames "#\tpc\tfunction+off\tfile:line", then "# HeapAlloc = N" among
// the MemStats lines.
func parseHeapProfile(r io.Reader) (liveHeap, error) {
	h := liveHeap{Owners: map[string]int64{}, HeapAlloc: -1}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	rate := int64(0)
	var count, size int64
	var frames []string
	inRecord := false
	flush := func() {
		if inRecord {
			_, bytes := scaleHeapSample(count, size, rate)
			h.Owners[ownerOf(frames)] += bytes
			h.Sampled += bytes
		}
		inRecord, frames = false, frames[:0]
	}
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case strings.HasPrefix(line, "heap profile: "):
			_, after, ok := strings.Cut(line, "@ heap/")
			if !ok {
				return h, fmt.Errorf("heap profile header without a rate: %q", line)
			}
			twice, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64)
			if err != nil {
				return h, fmt.Errorf("heap profile header: %q: %w", line, err)
			}
			rate = twice / 2
		case strings.HasPrefix(line, "#\t"):
			// "#\t0x4a1b2c\tpkg.Function+0x1f\tfile:line"
			if fields := strings.Split(line, "\t"); len(fields) >= 3 {
				frames = append(frames, fields[2])
			}
		case strings.HasPrefix(line, "# HeapAlloc = "):
			flush()
			v, err := strconv.ParseInt(strings.TrimPrefix(line, "# HeapAlloc = "), 10, 64)
			if err != nil {
				return h, fmt.Errorf("%q: %w", line, err)
			}
			h.HeapAlloc = v
		case strings.Contains(line, " @ "):
			flush()
			// "inuseObjects: inuseBytes [allocObjects: allocBytes] @ ..."
			var allocObjects, allocBytes int64
			if _, err := fmt.Sscanf(line, "%d: %d [%d: %d]", &count, &size, &allocObjects, &allocBytes); err != nil {
				return h, fmt.Errorf("heap record %q: %w", line, err)
			}
			inRecord = true
		}
	}
	flush()
	if err := scanner.Err(); err != nil {
		return h, err
	}
	if rate == 0 || h.HeapAlloc < 0 {
		return h, fmt.Errorf("not a text heap profile with MemStats (rate %d, HeapAlloc %d)", rate, h.HeapAlloc)
	}
	return h, nil
}

// scaleHeapSample undoes the heap profile's sampling: an allocation of
// average size avg is recorded with probability 1-exp(-avg/rate), which
// is how pprof scales the records too.
func scaleHeapSample(count, size, rate int64) (int64, int64) {
	if count == 0 || size == 0 {
		return 0, 0
	}
	if rate <= 1 {
		return count, size
	}
	avg := float64(size) / float64(count)
	scale := 1 / (1 - math.Exp(-avg/float64(rate)))
	return int64(float64(count) * scale), int64(float64(size) * scale)
}

// String is the total and the split, in MiB.
func (h liveHeap) String() string {
	parts := make([]string, 0, len(owners)+1)
	for _, name := range ownerNames() {
		parts = append(parts, fmt.Sprintf("%s %.0f", name, float64(h.Owners[name])/(1<<20)))
	}
	return fmt.Sprintf("%s (sampled %s: %s MiB)", mib(h.HeapAlloc), mib(h.Sampled), strings.Join(parts, ", "))
}

// heapReport is the live heap for a report line, or why it is missing.
func (s *server) heapReport(ctx context.Context) string {
	h, err := readLiveHeap(ctx, s)
	if err != nil {
		return "failed: " + err.Error()
	}
	return h.String()
}
