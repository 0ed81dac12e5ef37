package app

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/draplane/draplane/server"
)

// TestConfigFailureReleasesEverything: a failure after the embedded etcd
// started returns (instead of waiting for etcd twice), stops etcd and
// frees the data dir for the next attempt.
func TestConfigFailureReleasesEverything(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dataDir := t.TempDir()
	o := NewOptions()
	o.DataDir = dataDir
	o.SecureServing.BindPort = 0
	o.EmbeddedEtcd.UnsafeNoFsync = true
	// Read only once storage is configured, after etcd is up.
	o.Etcd.EncryptionProviderConfigFilepath = filepath.Join(dataDir, "missing-encryption-config.yaml")
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	_, err := o.Config(ctx)
	if err == nil || !strings.Contains(err.Error(), "etcd storage") {
		t.Fatalf("Config: got %v, want an etcd storage error", err)
	}
	lock, err := server.LockDataDir(dataDir)
	if err != nil {
		t.Fatalf("data dir still locked after a failed Config: %v", err)
	}
	lock.Unlock()
}
