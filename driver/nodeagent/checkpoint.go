package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// checkpoint is the file's content: what is prepared, by pod key.
type checkpoint struct {
	// Version is checkpointVersion; a file of another version is refused
	// rather than misread.
	Version int                    `json:"version"`
	Pods    map[string]preparedPod `json:"pods"`
}

const checkpointVersion = 1

// loadCheckpoint reads what an earlier run prepared. A missing file is an
// empty checkpoint.
func (a *Agent) loadCheckpoint() error {
	if a.opts.Checkpoint == "" {
		return nil
	}
	data, err := os.ReadFile(a.opts.Checkpoint)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("checkpoint %s: %w", a.opts.Checkpoint, err)
	}
	if c.Version != checkpointVersion {
		return fmt.Errorf("checkpoint %s has version %d, this agent reads version %d", a.opts.Checkpoint, c.Version, checkpointVersion)
	}
	for key, pod := range c.Pods {
		a.prepared[key] = pod
		a.addHoldersLocked(pod, 1)
	}
	return nil
}

// completed reports whether every claim of this pod (same UID) was
// prepared already.
func (a *Agent) completed(key string, pod *corev1.Pod) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, ok := a.prepared[key]
	return ok && held.Complete && held.UID == string(pod.UID)
}

// record notes what a pod holds and writes the checkpoint.
func (a *Agent) record(key string, pod preparedPod) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.prepared[key]; ok {
		a.addHoldersLocked(old, -1)
	}
	a.prepared[key] = pod
	a.addHoldersLocked(pod, 1)
	return a.saveLocked()
}

// forget notes that a pod holds nothing any more and writes the
// checkpoint.
func (a *Agent) forget(key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.prepared[key]; ok {
		a.addHoldersLocked(old, -1)
	}
	delete(a.prepared, key)
	return a.saveLocked()
}

// saveLocked writes the checkpoint: to a new file, synced, then renamed
// over the old one, so that a crash leaves one or the other whole.
func (a *Agent) saveLocked() error {
	if a.opts.Checkpoint == "" {
		return nil
	}
	data, err := json.Marshal(checkpoint{Version: checkpointVersion, Pods: a.prepared})
	if err != nil {
		return err
	}
	dir := filepath.Dir(a.opts.Checkpoint)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".checkpoint-*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), a.opts.Checkpoint); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
