package allocation

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// maxParked is how long a pod waits for a cluster event before it is
// retried anyway, and flushEvery how often that is looked at:
// kube-scheduler's podMaxInUnschedulablePodsDuration (5 minutes) and its
// flush period (30 seconds). A change no handler sees (one the informers
// missed, or one no event announces) then costs minutes, not forever.
const (
	maxParked  = 5 * time.Minute
	flushEvery = 30 * time.Second
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
	// keys are the parked keys and when they were parked, by clock
	// (the controller's).
	keys  map[string]time.Time
	clock clock.PassiveClock
}

func newUnschedulablePods(clock clock.PassiveClock) *unschedulablePods {
	return &unschedulablePods{keys: make(map[string]time.Time), clock: clock}
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
	u.keys[key] = u.clock.Now()
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

// takeOlderThan takes the keys parked for longer than d out of the set,
// to be queued again. It is no cluster event: the others stay parked.
func (u *unschedulablePods) takeOlderThan(d time.Duration) []string {
	u.mutex.Lock()
	defer u.mutex.Unlock()
	var keys []string
	deadline := u.clock.Now().Add(-d)
	for key, parked := range u.keys {
		if parked.Before(deadline) {
			keys = append(keys, key)
			delete(u.keys, key)
		}
	}
	return keys
}
