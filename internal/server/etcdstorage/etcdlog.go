package etcdstorage

import (
	"strings"

	"go.uber.org/zap/zapcore"
)

// quietEtcdCore drops what embedded etcd logs as an error on a healthy
// start and nobody can act on. Everything else passes unchanged.
//
// On a fresh data dir, etcd's storage version monitor runs before the new
// member has written its first raft term to the backend, fails with
// "missing term information" (with a stack trace) and succeeds on its next
// round a few seconds later.
type quietEtcdCore struct {
	zapcore.Core
}

func (c quietEtcdCore) With(fields []zapcore.Field) zapcore.Core {
	return quietEtcdCore{c.Core.With(fields)}
}

func (c quietEtcdCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(entry.Level) {
		return checked.AddCore(entry, c)
	}
	return checked
}

func (c quietEtcdCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	if harmlessEtcdEntry(entry, fields) {
		return nil
	}
	return c.Core.Write(entry, fields)
}

func harmlessEtcdEntry(entry zapcore.Entry, fields []zapcore.Field) bool {
	if entry.Message != "failed to update storage version" {
		return false
	}
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && strings.HasSuffix(err.Error(), "missing term information") {
			return true
		}
	}
	return false
}
