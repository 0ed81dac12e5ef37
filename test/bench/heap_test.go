package main

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

// keep holds what the test allocates so that it is live at the GC.
var keep [][]byte

//go:noinline
func allocateLive(n, size int) {
	for range n {
		keep = append(keep, make([]byte, size))
	}
}

// The parser reads this process's own text heap profile: the 64 MiB the
// test holds show in HeapAlloc and in the sampled in-use bytes of owner
// "other". The test samples every allocation while it allocates: at the
// default rate (one sample per 512 KiB on average) about 128 samples fall
// into the 64 MiB, and their count alone varies by some 9%, so a check
// within 10% failed now and then.
func TestParseHeapProfile(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	const n, size = 256, 256 << 10
	allocateLive(n, size)
	defer func() { keep = nil }()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	h, err := parseHeapProfile(&buf)
	if err != nil {
		t.Fatal(err)
	}
	const held = n * size
	if h.HeapAlloc < held {
		t.Errorf("HeapAlloc %d, want at least the %d bytes held", h.HeapAlloc, held)
	}
	if got := h.Owners["other"]; got < held*9/10 || got > held*11/10 {
		t.Errorf("sampled in-use bytes of owner other %d, want about %d", got, held)
	}
	if h.Sampled < h.Owners["other"] {
		t.Errorf("sampled total %d below one owner's %d", h.Sampled, h.Owners["other"])
	}
	if !strings.Contains(h.String(), "watch caches 0") {
		t.Errorf("report %q does not list the watch caches", h)
	}
}

func TestOwnerOf(t *testing.T) {
	tests := map[string]struct {
		frames []string
		want   string
	}{
		"watch cache fills through the reflector": {
			frames: []string{"encoding/json.Unmarshal+0x1", "k8s.io/client-go/tools/cache.(*Reflector).list+0x2", "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).startCaching+0x3"},
			want:   "watch caches",
		},
		"watch cache event": {
			frames: []string{"k8s.io/apiserver/pkg/storage/etcd3.decodeObj+0x1", "k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).transform+0x2"},
			want:   "watch caches",
		},
		"informer watch": {
			frames: []string{"k8s.io/api/core/v1.(*Pod).Unmarshal+0x1", "k8s.io/client-go/rest/watch.(*Decoder).Decode+0x2", "k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive+0x3"},
			want:   "informers",
		},
		"informer":  {frames: []string{"k8s.io/client-go/tools/cache.(*threadSafeMap).Add+0x1"}, want: "informers"},
		"allocator": {frames: []string{"github.com/draplane/draplane/allocator.(*Allocator).Allocate+0x1"}, want: "allocator"},
		"etcd":      {frames: []string{"go.etcd.io/etcd/server/v3/storage/mvcc.(*treeIndex).Put+0x1"}, want: "etcd"},
		"other":     {frames: []string{"runtime.malg+0x1"}, want: "other"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ownerOf(tc.frames); got != tc.want {
				t.Errorf("owner %q, want %q", got, tc.want)
			}
		})
	}
}
