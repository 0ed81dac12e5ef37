package etcdstorage

import "testing"

func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	lock, err := LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file, so a second open in the same
	// process conflicts just like another process would.
	if _, err := LockDataDir(dir); err == nil {
		t.Error("second lock succeeded while the first is held")
	}
	lock.Unlock()
	again, err := LockDataDir(dir)
	if err != nil {
		t.Errorf("lock after unlock: %v", err)
	}
	again.Unlock()
}
