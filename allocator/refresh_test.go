package allocator

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// TestStateRefresh: a state kept current with Refresh after every change
// of the in-use accounting equals the state built from scratch, for
// exclusive, shared (with consumed capacity), admin-access and
// counter-consuming devices, and devices the inventory does not know.
func TestStateRefresh(t *testing.T) {
	var devices []resourceapi.Device
	for i := range 4 {
		devices = append(devices, mkDev(fmt.Sprintf("plain-%d", i)))
		devices = append(devices, mkDev(fmt.Sprintf("part-%d", i), consumes("set", "mem", 10)))
		devices = append(devices, mkDev(fmt.Sprintf("multi-%d", i), shared("bw", 100, nil), consumes("set", "mem", 5)))
	}
	slice := mkSlice("pool", "node-a", devices, counterSet("set", map[string]int64{"mem": 40}))
	inv := New(Options{}).Prepare(Snapshot{Classes: classes(mkClass("gpu")), Slices: split(slice)})
	if len(inv.devices) != len(devices) {
		t.Fatalf("inventory has %d devices, want %d", len(inv.devices), len(devices))
	}
	names := []string{"unknown"}
	for _, d := range devices {
		names = append(names, d.Name)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	randomAllocation := func() *resourceapi.AllocationResult {
		if rng.IntN(4) == 0 {
			return nil
		}
		alloc := &resourceapi.AllocationResult{}
		for range 1 + rng.IntN(3) {
			name := names[rng.IntN(len(names))]
			r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: testDriver, Pool: "pool", Device: name}
			switch rng.IntN(4) {
			case 0:
				r.AdminAccess = new(true)
			case 1:
				r.ShareID = new(types.UID(fmt.Sprint(rng.IntN(1000))))
				r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"bw": qty(int64(1 + rng.IntN(20)))}
			}
			alloc.Devices.Results = append(alloc.Devices.Results, r)
		}
		return alloc
	}

	u := NewInUse()
	st := inv.State(u)
	for step := range 2000 {
		uid := types.UID(fmt.Sprint("claim-", rng.IntN(12)))
		old, alloc := u.Claim(uid), randomAllocation()
		u.SetClaim(uid, alloc)
		st.Refresh(u, old, alloc)
		if want := inv.State(u); !reflect.DeepEqual(st, want) {
			t.Fatalf("step %d: refreshed state\n%+v\nbuilt state\n%+v", step, st, want)
		}
	}
}
