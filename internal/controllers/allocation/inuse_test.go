package allocation

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestTrackerCountsIncrementally: after any sequence of informer events,
// pending allocations, writes, drops and deletions, the accounting the
// tracker keeps up to date counts exactly the devices that counting every
// known allocation from scratch does, and the allocator state it keeps up
// to date with it is the state built from that count.
func TestTrackerCountsIncrementally(t *testing.T) {
	const claims, devices, steps = 8, 6, 3000
	allocation := func(device int) *resourceapi.AllocationResult {
		return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "req", Driver: testDriver, Pool: "node-a", Device: fmt.Sprintf("gpu-%d", device)},
		}}}
	}
	fromScratch := func(tracker *allocationTracker) *allocator.InUse {
		u := allocator.NewInUse()
		for _, a := range tracker.seen {
			u.AddAllocation(a)
		}
		for uid, p := range tracker.pending {
			if _, ok := tracker.seen[uid]; !ok {
				u.AddAllocation(p.allocation)
			}
		}
		return u
	}
	node := "node-a"
	slice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: testDriver, NodeName: &node,
		Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}}}
	for d := range devices - 1 { // one device the inventory does not know
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", d)})
	}
	inv := allocator.New(allocator.Options{}).Prepare(allocator.Snapshot{Slices: []*resourceapi.ResourceSlice{slice}})
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			random := rand.New(rand.NewPCG(seed, 1))
			state := newPlacementState(placementInputs{})
			tracker := state.tracker
			state.mutex.Lock()
			tracker.stateLocked(inv)
			state.mutex.Unlock()
			rv := 0
			for step := range steps {
				uid := types.UID(fmt.Sprintf("claim-%d", random.IntN(claims)))
				rv++
				var op string
				switch random.IntN(8) {
				case 0:
					op = "pending"
					state.mutex.Lock()
					tracker.addPendingLocked(uid, "pod", "pod", allocation(random.IntN(devices)))
					state.mutex.Unlock()
				case 1:
					op = "written"
					tracker.written(uid, strconv.Itoa(rv))
				case 2:
					op = "uncertain"
					tracker.uncertain(uid, strconv.Itoa(rv))
				case 3:
					op = "drop"
					tracker.drop(uid)
				case 4:
					op = "dropIfWriting"
					tracker.dropIfWriting(uid)
				case 5:
					op = "observe"
					tracker.observe(uid, strconv.Itoa(rv), allocation(random.IntN(devices)), false)
				case 6:
					op = "observe-free"
					tracker.observe(uid, strconv.Itoa(rv), nil, false)
				case 7:
					op = "delete"
					tracker.observe(uid, strconv.Itoa(rv), nil, true)
				}
				state.mutex.Lock()
				want, got := fromScratch(tracker), tracker.inUseLocked()
				for d := range devices {
					id := allocator.DeviceID{Driver: testDriver, Pool: "node-a", Device: fmt.Sprintf("gpu-%d", d)}
					if got.Allocated(id) != want.Allocated(id) {
						t.Fatalf("step %d (%s %s): gpu-%d allocated=%v, counted from scratch %v", step, op, uid, d, got.Allocated(id), want.Allocated(id))
					}
				}
				if got, want := tracker.stateLocked(inv), inv.State(want); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%s %s): state %+v, built from scratch %+v", step, op, uid, got, want)
				}
				state.mutex.Unlock()
			}
		})
	}
}
