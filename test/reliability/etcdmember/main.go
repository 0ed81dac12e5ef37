// Command etcdmember runs one member of an etcd cluster on loopback, built
// from the etcd server Go module. The reliability tests start one process
// per member so that a member can be killed like a real one.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	name := flag.String("name", "m0", "member name")
	dir := flag.String("data-dir", "", "data directory")
	clientURL := flag.String("client-url", "", "client URL, e.g. http://127.0.0.1:23790 (never the default 2379)")
	peerURL := flag.String("peer-url", "", "peer URL, e.g. http://127.0.0.1:23800 (never the default 2380)")
	initialCluster := flag.String("initial-cluster", "", "name=peerURL,... of every member")
	noFsync := flag.Bool("unsafe-no-fsync", false, "skip fsync (test data only)")
	flag.Parse()
	if *dir == "" || *clientURL == "" || *peerURL == "" || *initialCluster == "" {
		fmt.Fprintln(os.Stderr, "etcdmember: --data-dir, --client-url, --peer-url and --initial-cluster are required")
		os.Exit(2)
	}
	for _, u := range []string{*clientURL, *peerURL} {
		if strings.HasSuffix(u, ":2379") || strings.HasSuffix(u, ":2380") {
			fmt.Fprintln(os.Stderr, "etcdmember: refusing the default ports 2379/2380")
			os.Exit(2)
		}
	}
	client, err := url.Parse(*clientURL)
	if err != nil {
		fatal(err)
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		fatal(err)
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.UnsafeNoFsync = *noFsync
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = *initialCluster
	cfg.InitialClusterToken = "draplane-reliability"
	cfg.QuotaBackendBytes = 512 << 20
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		fatal(err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
		fmt.Printf("etcdmember: %s ready, clients on %s\n", *name, *clientURL)
	case err := <-etcd.Err():
		fatal(err)
	case <-time.After(5 * time.Minute):
		fatal(fmt.Errorf("not ready within 5 minutes"))
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-signals:
		etcd.Close()
	case err := <-etcd.Err():
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "etcdmember:", err)
	os.Exit(1)
}
