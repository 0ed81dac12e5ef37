package nodeagent

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Claims shared by pods of one node. As the kubelet (its claim info
// cache), the agent prepares a claim once per node however many of the
// node's pods use it, a pod claim of each or a PodGroup's claim, and
// unprepares it once the last of them is gone. Each pod's record lists
// the claims it uses; holders counts, per node, driver and claim, the
// records that list it, and a claim is only prepared by the first of
// them and unprepared by the last. Per-claim locks keep two pods of one
// claim from both deciding to be first (or last) at once.

// holderKey is one claim of one driver on one node.
type holderKey struct {
	node, driver, uid string
}

// addHoldersLocked counts the pod's claims as held (delta 1) or no longer
// held (delta -1). a.mu is held.
func (a *Agent) addHoldersLocked(pod preparedPod, delta int) {
	for _, c := range pod.Claims {
		k := holderKey{node: pod.Node, driver: c.Driver, uid: c.UID}
		a.holders[k] += delta
		if a.holders[k] <= 0 {
			delete(a.holders, k)
		}
	}
}

// heldByOthers reports whether a record other than key's holds the claim
// of the driver on the node. A record without a node (written before
// records named one, by an agent of one node) is taken for the same node.
func (a *Agent) heldByOthers(key, node string, c heldClaim) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.holders[holderKey{node: node, driver: c.Driver, uid: c.UID}]
	if node != "" {
		n += a.holders[holderKey{driver: c.Driver, uid: c.UID}]
	}
	if own, ok := a.prepared[key]; ok && (own.Node == node || own.Node == "") && slices.ContainsFunc(own.Claims, func(h heldClaim) bool { return h.Driver == c.Driver && h.UID == c.UID }) {
		n--
	}
	return n > 0
}

// claimLocks are locks per claim UID, kept while someone holds or waits
// for them.
type claimLocks struct {
	mu    sync.Mutex
	locks map[types.UID]*claimLock
}

type claimLock struct {
	sync.Mutex
	users int
}

// lock locks the claims (in UID order, so that two callers never wait
// for each other crosswise) and returns the unlock.
func (l *claimLocks) lock(uids []types.UID) func() {
	sorted := slices.Compact(slices.Sorted(slices.Values(uids)))
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[types.UID]*claimLock{}
	}
	held := make([]*claimLock, len(sorted))
	for i, uid := range sorted {
		cl := l.locks[uid]
		if cl == nil {
			cl = &claimLock{}
			l.locks[uid] = cl
		}
		cl.users++
		held[i] = cl
	}
	l.mu.Unlock()
	for _, cl := range held {
		cl.Lock()
	}
	return func() {
		for _, cl := range held {
			cl.Unlock()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, uid := range sorted {
			if held[i].users--; held[i].users == 0 {
				delete(l.locks, uid)
			}
		}
	}
}
