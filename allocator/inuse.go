package allocator

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// InUse records which devices, shares and capacity existing allocations
// hold. Build it from the allocated claims and keep adding to it: the
// allocation controller adds allocations it made before it sees them back
// from the API. It is not safe for concurrent use.
type InUse struct {
	exclusive map[DeviceID]int
	shared    map[DeviceID]*sharedUse
	// byClaim remembers what was recorded per claim so that recording a
	// claim again replaces instead of double counting.
	byClaim map[types.UID]*resourceapi.AllocationResult
	// admin counts admin-access allocations per device; they do not make
	// a device busy and are kept only for reporting.
	admin map[DeviceID]int
}

// sharedUse sums the allocations of one device that allows multiple
// allocations.
type sharedUse struct {
	shares   int
	consumed map[resourceapi.QualifiedName]resource.Quantity
}

// NewInUse returns empty accounting.
func NewInUse() *InUse {
	return &InUse{exclusive: make(map[DeviceID]int), shared: make(map[DeviceID]*sharedUse), byClaim: make(map[types.UID]*resourceapi.AllocationResult), admin: make(map[DeviceID]int)}
}

// AddClaim records the allocation of a claim (none if it is not
// allocated), replacing what was recorded for the same claim UID before.
// Feeding it every claim the informer delivers, and the allocations the
// controller made itself under the claim's UID, counts each claim once.
func (u *InUse) AddClaim(claim *resourceapi.ResourceClaim) {
	if claim == nil {
		return
	}
	if claim.UID == "" {
		u.AddAllocation(claim.Status.Allocation)
		return
	}
	u.SetClaim(claim.UID, claim.Status.Allocation)
}

// SetClaim records the allocation of the claim with this UID, replacing
// what was recorded for it before; nil removes it.
func (u *InUse) SetClaim(uid types.UID, alloc *resourceapi.AllocationResult) {
	if old, ok := u.byClaim[uid]; ok {
		u.apply(old, -1)
		delete(u.byClaim, uid)
	}
	if alloc != nil {
		u.apply(alloc, 1)
		u.byClaim[uid] = alloc
	}
}

// Claim returns the allocation recorded for the claim with this UID, nil
// if none.
func (u *InUse) Claim(uid types.UID) *resourceapi.AllocationResult { return u.byClaim[uid] }

// AddAllocation records the devices of one allocation that is not tracked
// by claim. Admin access does not make a device busy, so such results are
// not recorded.
func (u *InUse) AddAllocation(alloc *resourceapi.AllocationResult) {
	u.apply(alloc, 1)
}

// RemoveAllocation undoes AddAllocation, e.g. after a deallocation.
func (u *InUse) RemoveAllocation(alloc *resourceapi.AllocationResult) {
	u.apply(alloc, -1)
}

func (u *InUse) apply(alloc *resourceapi.AllocationResult, sign int) {
	if alloc == nil {
		return
	}
	for _, r := range alloc.Devices.Results {
		id := DeviceID{r.Driver, r.Pool, r.Device}
		if r.AdminAccess != nil && *r.AdminAccess {
			u.admin[id] += sign
			if u.admin[id] <= 0 {
				delete(u.admin, id)
			}
			continue
		}
		if r.ShareID == nil {
			u.exclusive[id] += sign
			if u.exclusive[id] <= 0 {
				delete(u.exclusive, id)
			}
			continue
		}
		s := u.shared[id]
		if s == nil {
			s = &sharedUse{consumed: make(map[resourceapi.QualifiedName]resource.Quantity)}
			u.shared[id] = s
		}
		s.shares += sign
		for name, q := range r.ConsumedCapacity {
			sum := s.consumed[name]
			if sign > 0 {
				sum.Add(q)
			} else {
				sum.Sub(q)
			}
			s.consumed[name] = sum
		}
		if s.shares <= 0 {
			delete(u.shared, id)
		}
	}
}

// Allocated reports whether a device is held exclusively.
func (u *InUse) Allocated(id DeviceID) bool { return u.exclusive[id] > 0 }

// Clone returns an independent copy.
func (u *InUse) Clone() *InUse {
	c := NewInUse()
	for id, n := range u.exclusive {
		c.exclusive[id] = n
	}
	for uid, alloc := range u.byClaim {
		c.byClaim[uid] = alloc
	}
	for id, n := range u.admin {
		c.admin[id] = n
	}
	for id, s := range u.shared {
		cs := &sharedUse{shares: s.shares, consumed: make(map[resourceapi.QualifiedName]resource.Quantity, len(s.consumed))}
		for name, q := range s.consumed {
			cs.consumed[name] = q.DeepCopy()
		}
		c.shared[id] = cs
	}
	return c
}

// State is an Inventory combined with what is in use, in the dense form the
// search works with. Build one per scheduling round with Inventory.State;
// it is read-only afterwards and safe for concurrent Allocate calls.
type State struct {
	inv *Inventory
	// busy marks devices held exclusively.
	busy []bool
	// shared marks devices that allow multiple allocations and have at
	// least one; their counters are already consumed.
	shared []bool
	// capUsed is the consumed capacity per device, aligned with device.caps.
	capUsed map[int][]int64
	// counterFree is what is left of every shared counter.
	counterFree []int64
	// admin counts admin-access allocations per device index.
	admin map[int]int
	// nodeBusy and nodeUsed count, per node with devices of its own
	// (device.local), those that are busy, and busy or shared.
	nodeBusy, nodeUsed []int32
}

// State combines the inventory with the in-use accounting. Devices that the
// inventory does not know are ignored.
func (inv *Inventory) State(u *InUse) *State {
	s := &State{
		inv:         inv,
		busy:        make([]bool, len(inv.devices)),
		shared:      make([]bool, len(inv.devices)),
		capUsed:     make(map[int][]int64),
		counterFree: append([]int64(nil), inv.counterTotals...),
		nodeBusy:    make([]int32, inv.localNodes),
		nodeUsed:    make([]int32, inv.localNodes),
	}
	if u == nil {
		return s
	}
	for id, n := range u.admin {
		if d := inv.byID[id]; d != nil {
			if s.admin == nil {
				s.admin = make(map[int]int)
			}
			s.admin[d.index] = n
		}
	}
	consume := func(d *device) {
		for _, c := range d.counters {
			s.counterFree[c.counter] -= c.amount
		}
	}
	for id := range u.exclusive {
		d := inv.byID[id]
		if d == nil || s.busy[d.index] {
			continue
		}
		s.busy[d.index] = true
		consume(d)
	}
	for id, use := range u.shared {
		d := inv.byID[id]
		if d == nil {
			continue
		}
		if !s.shared[d.index] && !s.busy[d.index] {
			consume(d)
		}
		s.shared[d.index] = true
		used := make([]int64, len(d.caps))
		for name, q := range use.consumed {
			if i := capacityIndex(d, name); i >= 0 {
				used[i] += q.MilliValue()
			}
		}
		s.capUsed[d.index] = used
	}
	for _, d := range inv.devices {
		s.countLocal(d, false, false)
	}
	return s
}

// setFlags marks a device busy and shared or not, keeping the per-node
// counts.
func (s *State) setFlags(d *device, busy, shared bool) {
	wasBusy, wasShared := s.busy[d.index], s.shared[d.index]
	s.busy[d.index], s.shared[d.index] = busy, shared
	s.countLocal(d, wasBusy, wasShared)
}

// countLocal moves a device's part of the per-node counts from the flags
// it had to the flags it has.
func (s *State) countLocal(d *device, wasBusy, wasShared bool) {
	if d.local < 0 {
		return
	}
	busy, shared := s.busy[d.index], s.shared[d.index]
	s.nodeBusy[d.local] += count(busy) - count(wasBusy)
	s.nodeUsed[d.local] += count(busy || shared) - count(wasBusy || wasShared)
}

func count(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// Refresh brings the state up to date with u for the devices of the given
// allocations, after u changed for them (the allocation a claim had and
// the one it has now): afterwards the state is what the inventory's State
// would build from u, without looking at every allocation again. The
// allocation controller keeps one state current this way. It must not
// run concurrently with Allocate or SelectNode on the same State.
func (s *State) Refresh(u *InUse, allocs ...*resourceapi.AllocationResult) {
	for _, alloc := range allocs {
		if alloc == nil {
			continue
		}
		for _, r := range alloc.Devices.Results {
			id := DeviceID{r.Driver, r.Pool, r.Device}
			if d := s.inv.byID[id]; d != nil {
				s.refreshDevice(u, id, d)
			}
		}
	}
}

// refreshDevice recomputes one device's part of the state from u, as
// State does.
func (s *State) refreshDevice(u *InUse, id DeviceID, d *device) {
	i := d.index
	if n := u.admin[id]; n > 0 {
		if s.admin == nil {
			s.admin = make(map[int]int)
		}
		s.admin[i] = n
	} else if s.admin != nil {
		delete(s.admin, i)
		if len(s.admin) == 0 {
			s.admin = nil
		}
	}
	consumed := s.busy[i] || s.shared[i]
	use := u.shared[id]
	s.setFlags(d, u.exclusive[id] > 0, use != nil)
	if now := s.busy[i] || s.shared[i]; now != consumed {
		sign := int64(1)
		if !now {
			sign = -1
		}
		for _, c := range d.counters {
			s.counterFree[c.counter] -= sign * c.amount
		}
	}
	if use == nil {
		delete(s.capUsed, i)
		return
	}
	used := make([]int64, len(d.caps))
	for name, q := range use.consumed {
		if ci := capacityIndex(d, name); ci >= 0 {
			used[ci] += q.MilliValue()
		}
	}
	s.capUsed[i] = used
}

// AddAllocation folds one more allocation into the state, as if it had
// been in the InUse the state was built from. The allocation controller can
// use it to account for the pods it places during a round instead of
// rebuilding the state. It must not run concurrently with Allocate or
// SelectNode on the same State.
func (s *State) AddAllocation(alloc *resourceapi.AllocationResult) {
	if alloc == nil {
		return
	}
	for _, r := range alloc.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		d := s.inv.byID[DeviceID{r.Driver, r.Pool, r.Device}]
		if d == nil {
			continue
		}
		if !s.busy[d.index] && !s.shared[d.index] {
			for _, c := range d.counters {
				s.counterFree[c.counter] -= c.amount
			}
		}
		if r.ShareID == nil {
			s.setFlags(d, true, s.shared[d.index])
			continue
		}
		s.setFlags(d, s.busy[d.index], true)
		used := s.capUsed[d.index]
		if used == nil {
			used = make([]int64, len(d.caps))
			s.capUsed[d.index] = used
		}
		for name, q := range r.ConsumedCapacity {
			if i := capacityIndex(d, name); i >= 0 {
				used[i] += q.MilliValue()
			}
		}
	}
}

// capacityIndex finds a capacity of the device by name. Names must match
// exactly, as in Kubernetes 1.37: "bw" and "<driver>/bw" are different.
func capacityIndex(d *device, name resourceapi.QualifiedName) int {
	for i := range d.caps {
		if d.caps[i].name == name {
			return i
		}
	}
	return -1
}
