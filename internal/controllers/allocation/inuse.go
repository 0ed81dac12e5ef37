package allocation

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// allocationTracker knows every allocation that holds devices: the ones
// the claim informer has delivered and the ones this controller made and
// the informer has not delivered yet. Without the second kind, two pods
// scheduled in quick succession could get the same device.
//
// It is part of the placement state, whose mutex guards it: callers of
// every method hold that.
type allocationTracker struct {
	// seen are the allocations of claims as the informer has them.
	seen map[types.UID]*resourceapi.AllocationResult
	// pending are allocations this controller decided on.
	pending map[types.UID]*pendingAllocation
	// inUse counts, per claim, the allocation allocationLocked returns; it
	// is kept up to date on every change of seen or pending, so that a
	// decision does not count every allocation in the cluster again.
	inUse *allocator.InUse
	// state is inUse folded into stateInventory, refreshed with inUse
	// per claim, so that a decision does not fold every allocation in
	// again either (stateLocked).
	state          *allocator.State
	stateInventory *allocator.Inventory
}

// pendingAllocation is an allocation that the controller made and may not
// have seen back yet.
type pendingAllocation struct {
	allocation *resourceapi.AllocationResult
	// podUID is the pod it was made for.
	podUID types.UID
	// consumerUID is whom it is reserved for with the allocation: the
	// pod, or its PodGroup for a group claim.
	consumerUID types.UID
	// writing is set while a worker writes it; the informer can then not
	// tell whether the write landed.
	writing bool
	// settledAt: once the write is over, an informer event for the claim
	// with at least this resourceVersion reflects the write (or what
	// happened after it), and the informer takes over.
	settledAt uint64
}

func newAllocationTracker() *allocationTracker {
	return &allocationTracker{
		seen:    make(map[types.UID]*resourceapi.AllocationResult),
		pending: make(map[types.UID]*pendingAllocation),
		inUse:   allocator.NewInUse(),
	}
}

// countLocked brings inUse up to date for one claim after seen or pending
// changed for it.
func (t *allocationTracker) countLocked(uid types.UID) {
	old, allocation := t.inUse.Claim(uid), t.allocationLocked(uid)
	if old == allocation {
		return
	}
	t.inUse.SetClaim(uid, allocation)
	if t.state != nil {
		t.state.Refresh(t.inUse, old, allocation)
	}
}

// observe records what the informer says about a claim; a nil allocation
// means the claim is not allocated (or deleted, with deleted set).
func (t *allocationTracker) observe(uid types.UID, resourceVersion string, allocation *resourceapi.AllocationResult, deleted bool) (freed bool) {
	_, wasSeen := t.seen[uid]
	if allocation != nil && !deleted {
		t.seen[uid] = allocation
	} else {
		delete(t.seen, uid)
		freed = wasSeen
	}
	if p, ok := t.pending[uid]; ok {
		rv, err := strconv.ParseUint(resourceVersion, 10, 64)
		if deleted || (!p.writing && err == nil && rv >= p.settledAt) {
			delete(t.pending, uid)
			freed = freed || allocation == nil
		}
	}
	t.countLocked(uid)
	return freed
}

// allocationLocked returns what the controller knows of a claim's allocation:
// the informer's, else a pending one.
func (t *allocationTracker) allocationLocked(uid types.UID) *resourceapi.AllocationResult {
	if a, ok := t.seen[uid]; ok {
		return a
	}
	if p, ok := t.pending[uid]; ok {
		return p.allocation
	}
	return nil
}

// inUseLocked is the accounting of all devices held by allocations: the
// informer's, and the pending ones of claims it has none for. It is the
// tracker's own, kept up to date in place: callers only read it (Clone
// it to count more).
func (t *allocationTracker) inUseLocked() *allocator.InUse {
	return t.inUse
}

// stateLocked is the accounting of inUseLocked folded into the inventory,
// the tracker's own, kept up to date in place: callers only read it.
func (t *allocationTracker) stateLocked(inv *allocator.Inventory) *allocator.State {
	if t.state == nil || t.stateInventory != inv {
		t.state, t.stateInventory = inv.State(t.inUse), inv
	}
	return t.state
}

// addPendingLocked records allocations made for a pod (and reserved for
// the consumer with it) before they are written.
func (t *allocationTracker) addPendingLocked(uid, podUID, consumerUID types.UID, allocation *resourceapi.AllocationResult) {
	t.pending[uid] = &pendingAllocation{allocation: allocation, podUID: podUID, consumerUID: consumerUID, writing: true}
	t.countLocked(uid)
}

// written: the allocation is stored with this resourceVersion.
func (t *allocationTracker) written(uid types.UID, resourceVersion string) {
	p, ok := t.pending[uid]
	if !ok {
		return
	}
	p.writing = false
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		// Not an etcd revision (fake clients): keep it until the claim
		// goes away or the controller drops it.
		p.settledAt = ^uint64(0)
		return
	}
	p.settledAt = rv
}

// uncertain: the write may or may not have landed. The next informer
// event after baseVersion (the version the write was based on) tells.
func (t *allocationTracker) uncertain(uid types.UID, baseVersion string) {
	p, ok := t.pending[uid]
	if !ok {
		return
	}
	p.writing = false
	rv, err := strconv.ParseUint(baseVersion, 10, 64)
	if err != nil {
		p.settledAt = ^uint64(0)
		return
	}
	p.settledAt = rv + 1
}

// drop forgets a pending allocation: its write failed for sure, or the
// claim was deallocated again.
func (t *allocationTracker) drop(uid types.UID) {
	delete(t.pending, uid)
	t.countLocked(uid)
}

// writtenFor reports whether the controller wrote an allocation of the
// claim together with a reservation for the consumer (a pod or a
// PodGroup), which the informer may not show yet.
func (t *allocationTracker) writtenFor(uid, consumerUID types.UID) bool {
	p, ok := t.pending[uid]
	return ok && !p.writing && p.consumerUID == consumerUID
}

// dropIfWriting forgets an allocation whose write was never attempted.
func (t *allocationTracker) dropIfWriting(uid types.UID) {
	if p, ok := t.pending[uid]; ok && p.writing {
		delete(t.pending, uid)
		t.countLocked(uid)
	}
}

// pendingCount is for tests and logs.
func (t *allocationTracker) pendingCount() int {
	return len(t.pending)
}
