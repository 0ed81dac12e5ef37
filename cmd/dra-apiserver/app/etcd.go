package app

import (
	"fmt"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/draplane/draplane/internal/server/etcdstorage"
)

// EmbeddedEtcdOptions configure the etcd that runs inside the process when
// no --etcd-servers are given.
type EmbeddedEtcdOptions struct {
	// QuotaBackendBytes is the size at which etcd stops accepting writes.
	QuotaBackendBytes int64
	// UnsafeNoFsync trades durability for speed: a crash can lose or
	// corrupt recent writes. For throwaway development data only.
	UnsafeNoFsync bool
	// LogLevel of etcd's own logger; etcd is chatty at info.
	LogLevel string
}

// NewEmbeddedEtcdOptions returns the defaults: 1 GiB quota (etcd's own
// default of 2 GiB is more than a development control plane needs and
// makes a runaway writer fill the disk before it is noticed), fsync on,
// only errors logged.
func NewEmbeddedEtcdOptions() *EmbeddedEtcdOptions {
	return &EmbeddedEtcdOptions{
		QuotaBackendBytes: 1 << 30,
		LogLevel:          "error",
	}
}

// AddFlags adds the embedded etcd flags.
func (o *EmbeddedEtcdOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int64Var(&o.QuotaBackendBytes, "embedded-etcd-quota-backend-bytes", o.QuotaBackendBytes,
		"Size in bytes at which the embedded etcd stops accepting writes (it then has to be compacted and defragmented).")
	fs.BoolVar(&o.UnsafeNoFsync, "embedded-etcd-unsafe-no-fsync", o.UnsafeNoFsync,
		"Turn off fsync in the embedded etcd. UNSAFE: a crash can lose or corrupt data. Only for throwaway development data.")
	fs.StringVar(&o.LogLevel, "embedded-etcd-log-level", o.LogLevel,
		"Log level of the embedded etcd: debug, info, warn, error, panic or fatal.")
}

// Validate checks the embedded etcd options.
func (o *EmbeddedEtcdOptions) Validate() []error {
	var errs []error
	if o.QuotaBackendBytes <= 0 {
		errs = append(errs, fmt.Errorf("--embedded-etcd-quota-backend-bytes must be positive, got %d", o.QuotaBackendBytes))
	}
	if _, err := zapcore.ParseLevel(o.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--embedded-etcd-log-level: %w", err))
	}
	return errs
}

// config is the embedded etcd's configuration from these options.
func (o *EmbeddedEtcdOptions) config() etcdstorage.EmbeddedEtcdConfig {
	return etcdstorage.EmbeddedEtcdConfig{QuotaBackendBytes: o.QuotaBackendBytes, UnsafeNoFsync: o.UnsafeNoFsync, LogLevel: o.LogLevel}
}
