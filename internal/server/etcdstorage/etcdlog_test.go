package etcdstorage

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestQuietEtcdCore: the storage version monitor's failure on a fresh data
// dir is dropped; every other entry, errors included, passes.
func TestQuietEtcdCore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		msg    string
		fields []zap.Field
		want   bool
	}{
		{"fresh data dir: no term yet", "failed to update storage version",
			[]zap.Field{zap.String("cluster-version", "3.7.0"), zap.Error(errors.New("cannot detect storage schema version: missing term information"))}, false},
		{"storage version update failing otherwise", "failed to update storage version",
			[]zap.Field{zap.Error(errors.New("disk I/O error"))}, true},
		{"another error", "failed to apply request", []zap.Field{zap.Error(errors.New("missing term information"))}, true},
		{"a message without an error", "failed to update storage version", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			logger := zap.New(quietEtcdCore{core}).With(zap.String("member", "draplane"))
			logger.Error(tc.msg, tc.fields...)
			if got := logs.Len() == 1; got != tc.want {
				t.Errorf("logged %v, want %v: %v", got, tc.want, logs.All())
			}
		})
	}
}
