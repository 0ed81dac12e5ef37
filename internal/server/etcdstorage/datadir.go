package etcdstorage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DataDirLock is an exclusive lock on a data dir. Two servers on one data
// dir would fight over the etcd files (the second one blocks forever in
// etcd's own WAL lock), so the second fails at once instead.
type DataDirLock struct {
	file *os.File
}

// LockDataDir takes the lock or says which process holds it.
func LockDataDir(dir string) (*DataDirLock, error) {
	path := filepath.Join(dir, "lock")
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		file.Close()
		if pid, convErr := strconv.Atoi(strings.TrimSpace(string(holder))); convErr == nil {
			return nil, fmt.Errorf("data dir %s is in use by another dra-apiserver (pid %d): %w", dir, pid, err)
		}
		return nil, fmt.Errorf("data dir %s is in use by another dra-apiserver: %w", dir, err)
	}
	// The pid is only a hint for the error above; the flock is the lock.
	if err := file.Truncate(0); err == nil {
		_, _ = file.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DataDirLock{file: file}, nil
}

// Unlock releases the lock; the kernel also releases it when the process
// dies, so kill -9 never leaves a stale lock behind.
func (l *DataDirLock) Unlock() {
	if l == nil || l.file == nil {
		return
	}
	_ = syscall.Flock(int(l.file.Fd()), syscall.LOCK_UN)
	_ = l.file.Close()
	l.file = nil
}
