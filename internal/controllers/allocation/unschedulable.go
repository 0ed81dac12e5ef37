package allocation

import (
	"sync"
	"sync/atomic"
)

// unschedulablePods are the pods (and gangs, by their group's key) that
// did not fit and wait for a cluster event, and the count of those
// events: kube-scheduler's unschedulable pods of its scheduling queue.
// The work queue itself stays the controller's; this only says which
// keys go back to it.
type unschedulablePods struct {
	// clusterEvents counts events that may make unschedulable pods fit;
	// an attempt that saw it change meanwhile is retried instead of
	// parked.
	clusterEvents atomic.Int64

	mutex sync.Mutex
	keys  map[string]struct{}
}

func newUnschedulablePods() *unschedulablePods {
	return &unschedulablePods{keys: make(map[string]struct{})}
}

// moveAll counts a cluster event and takes every parked key but except
// out of the set, to be queued again.
func (u *unschedulablePods) moveAll(except string) []string {
	u.clusterEvents.Add(1)
	u.mutex.Lock()
	defer u.mutex.Unlock()
	keys := make([]string, 0, len(u.keys))
	for key := range u.keys {
		if key == except {
			continue
		}
		keys = append(keys, key)
		delete(u.keys, key)
	}
	return keys
}

// park adds the key until the next cluster event. It reports false, and
// leaves the key out, when an event arrived since eventsBefore: that may
// already have changed the answer, so the key is to be retried.
func (u *unschedulablePods) park(key string, eventsBefore int64) bool {
	u.mutex.Lock()
	u.keys[key] = struct{}{}
	u.mutex.Unlock()
	if u.clusterEvents.Load() != eventsBefore {
		u.remove(key)
		return false
	}
	return true
}

func (u *unschedulablePods) remove(key string) {
	u.mutex.Lock()
	defer u.mutex.Unlock()
	delete(u.keys, key)
}

func (u *unschedulablePods) has(key string) bool {
	u.mutex.Lock()
	defer u.mutex.Unlock()
	_, ok := u.keys[key]
	return ok
}
