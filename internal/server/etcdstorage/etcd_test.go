package etcdstorage

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2/ktesting"
)

// TestEmbeddedEtcdServes starts the embedded etcd twice on the same dir,
// writes keys through a real client and reads every one back after the
// restart. The one member keeps only a few raft entries in memory for
// followers it never has (etcd's default kept the last 5,000 writes,
// values included).
func TestEmbeddedEtcdServes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	const writes = 500
	for round, op := range []string{"put", "get"} {
		e, err := startEmbeddedEtcd(ctx, dir, &EmbeddedEtcdConfig{QuotaBackendBytes: 1 << 28, LogLevel: "error"})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := e.etcd.Server.Cfg.SnapshotCatchUpEntries; got != embeddedCatchUpEntries {
			t.Errorf("raft entries kept for followers: %d, want %d", got, embeddedCatchUpEntries)
		}
		client, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL}, DialTimeout: 20 * time.Second})
		if err != nil {
			e.Close()
			t.Fatalf("round %d: client: %v", round, err)
		}
		reqCtx, cancel := context.WithTimeout(ctx, time.Minute)
		for i := range writes {
			key := fmt.Sprintf("/draplane/test/%03d", i)
			switch op {
			case "put":
				_, err = client.Put(reqCtx, key, "kept")
			case "get":
				var resp *clientv3.GetResponse
				resp, err = client.Get(reqCtx, key)
				if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "kept") {
					t.Errorf("round %d: %s: got %v, want the value written before the restart", round, key, resp.Kvs)
				}
			}
			if err != nil {
				break
			}
		}
		cancel()
		client.Close()
		e.Close()
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, op, err)
		}
	}
}

// TestEmbeddedEtcdElectionTimeout: the one member elects itself within an
// election timeout of its start, and nothing is served before; the
// timeout is 100 ms (etcd's default of 1 s made every start wait 0.1 to
// 1 s), and fsync stays on.
func TestEmbeddedEtcdElectionTimeout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e, err := startEmbeddedEtcd(ctx, t.TempDir(), &EmbeddedEtcdConfig{QuotaBackendBytes: 1 << 28, LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cfg := e.etcd.Server.Cfg
	if timeout := time.Duration(cfg.ElectionTicks) * time.Duration(cfg.TickMs) * time.Millisecond; timeout > 100*time.Millisecond {
		t.Errorf("election timeout %v, want at most 100ms", timeout)
	}
	if cfg.UnsafeNoFsync {
		t.Error("fsync is off")
	}
}
