// Package etcdstorage is where the server keeps its objects: the embedded
// etcd, the stores' in-process clients of it (no connection), the watch
// caches in front of them (with either etcd), and the lock that keeps a
// second server off a data dir's etcd files.
package etcdstorage

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// EmbeddedEtcdConfig configures the etcd that runs inside the process when
// no --etcd-servers are given.
type EmbeddedEtcdConfig struct {
	// QuotaBackendBytes is the size at which etcd stops accepting writes.
	QuotaBackendBytes int64
	// UnsafeNoFsync trades durability for speed: a crash can lose or
	// corrupt recent writes. For throwaway development data only.
	UnsafeNoFsync bool
	// LogLevel of etcd's own logger; etcd is chatty at info.
	LogLevel string
}

// EmbeddedEtcd is a single-member etcd running in this process.
type EmbeddedEtcd struct {
	etcd     *embed.Etcd
	logLevel zap.AtomicLevel
	// ClientURL is where clients connect: the health checks, and the API
	// server's storage unless it uses InProcessRESTOptions.
	ClientURL string
	// inProcess is the storage client of InProcessRESTOptions, if used.
	inProcess *inProcessEtcd
}

// startEmbeddedEtcd starts a one-member etcd with its data in dir. It
// listens on loopback only, on ports the kernel picks, so it never
// collides with a system etcd on 2379/2380.
func startEmbeddedEtcd(ctx context.Context, dir string, o *EmbeddedEtcdConfig) (*EmbeddedEtcd, error) {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create etcd data dir: %w", err)
	}
	level, err := zap.ParseAtomicLevel(o.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd log level: %w", err)
	}
	zapConfig := zap.NewProductionConfig()
	zapConfig.Level = level
	zapConfig.Sampling = nil
	zapLogger, err := zapConfig.Build(zap.WrapCore(func(core zapcore.Core) zapcore.Core { return quietEtcdCore{core} }))
	if err != nil {
		return nil, fmt.Errorf("build embedded etcd logger: %w", err)
	}

	// Port 0 everywhere: the peer URL is never dialled in a one-member
	// cluster, it only has to be the same on every start because etcd
	// stores the membership in the data dir.
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = "draplane"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.QuotaBackendBytes = o.QuotaBackendBytes
	cfg.UnsafeNoFsync = o.UnsafeNoFsync
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapLogger)
	// No metrics listener of its own: /metrics of the API server is enough.
	cfg.ListenMetricsUrls = nil
	// The one member elects itself 1 to ElectionMs/TickMs ticks after it
	// starts (raft's randomised timeout, which etcd fast-forwards to its
	// last tick), and serves nothing before: with etcd's default ticks
	// that wait was a large part of every start, with ticks ten times
	// shorter it is ten times shorter. With no peers the ticks send no
	// heartbeats; writes and fsync are as before.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	// etcd keeps the last SnapshotCatchUpEntries raft entries (every write
	// with its value) in memory for followers that fall behind; a
	// one-member cluster has none. etcd's default of 5,000 kept tens of
	// megabytes of recent writes (slices above all) in the heap.
	cfg.SnapshotCatchUpEntries = embeddedCatchUpEntries

	start := time.Now()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after 60s", dir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, fmt.Errorf("embedded etcd has no client listener")
	}
	addr, ok := e.Clients[0].Addr().(*net.TCPAddr)
	if !ok {
		e.Close()
		return nil, fmt.Errorf("embedded etcd listens on %v, want a TCP address", e.Clients[0].Addr())
	}
	clientURL := "http://" + net.JoinHostPort("127.0.0.1", fmt.Sprint(addr.Port))
	go func() {
		for err := range e.Err() {
			logger.Error(err, "Embedded etcd failed")
		}
	}()
	logger.V(2).Info("Embedded etcd ready", "dir", dir, "url", clientURL, "duration", time.Since(start))
	return &EmbeddedEtcd{etcd: e, logLevel: level, ClientURL: clientURL}, nil
}

// embeddedCatchUpEntries is how many raft entries the embedded etcd keeps
// in memory after its snapshots (every 100 entries): enough for raft's
// own bookkeeping, not a follower's catch-up.
const embeddedCatchUpEntries = 100

// Close stops etcd. Its logger is silenced first: closing the listeners
// makes etcd log harmless "use of closed network connection" errors.
func (e *EmbeddedEtcd) Close() {
	if e == nil {
		return
	}
	e.logLevel.SetLevel(zap.FatalLevel)
	if e.inProcess != nil {
		e.inProcess.close()
	}
	e.etcd.Close()
}

// StartEmbeddedEtcd starts the embedded etcd of a data dir.
func StartEmbeddedEtcd(ctx context.Context, dataDir string, config EmbeddedEtcdConfig) (*EmbeddedEtcd, error) {
	return startEmbeddedEtcd(ctx, etcdDir(dataDir), &config)
}

// etcdDir is where the embedded etcd keeps its data inside the data dir.
func etcdDir(dataDir string) string { return filepath.Join(dataDir, "etcd") }
