package allocation

import (
	"slices"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Device ownership beside another scheduler (cluster mode): kube-scheduler
// and this controller allocate from the same slices, and the API has no
// lock that would keep them from putting one device into two claims. So
// they never share a device. This controller allocates only the devices
// that carry a taint with Options.OwnerTaintKey, in their slice or
// through a DeviceTaintRule; kube-scheduler, like every allocator that
// honours device taints, does not allocate a device with a NoSchedule
// taint its claim does not tolerate. The taint is the owner's mark, not a
// taint for this controller: it is dropped from the devices it owns, and
// the devices without it are left out of its inventory.

// DefaultOwnerTaintKey is the key of the taint that marks the devices
// draplane places in cluster mode.
const DefaultOwnerTaintKey = "resource.draplane.dev/scheduler"

// ownDevices narrows the snapshot to the devices marked with the owner
// taint key and takes the mark off them: from the devices' own taints,
// and the taint rules that carry the key are not taints but the mark.
// The snapshot's slices are replaced by copies; the originals are kept
// unchanged (they are cached between inventories).
func ownDevices(snapshot *allocator.Snapshot, key string) {
	var owners []*resourceapi.DeviceTaintRule
	snapshot.TaintRules = slices.DeleteFunc(snapshot.TaintRules, func(rule *resourceapi.DeviceTaintRule) bool {
		if rule.Spec.Taint.Key == key {
			owners = append(owners, rule)
			return true
		}
		return false
	})
	isMark := func(taint resourceapi.DeviceTaint) bool { return taint.Key == key }
	for i, slice := range snapshot.Slices {
		devices := make([]resourceapi.Device, 0, len(slice.Spec.Devices))
		for _, device := range slice.Spec.Devices {
			if !slices.ContainsFunc(device.Taints, isMark) && !markedByRule(owners, slice, device.Name) {
				continue
			}
			if slices.ContainsFunc(device.Taints, isMark) {
				device.Taints = slices.DeleteFunc(slices.Clone(device.Taints), isMark)
			}
			devices = append(devices, device)
		}
		owned := *slice
		owned.Spec.Devices = devices
		snapshot.Slices[i] = &owned
	}
}

// markedByRule says whether one of the rules selects the device.
func markedByRule(rules []*resourceapi.DeviceTaintRule, slice *resourceapi.ResourceSlice, device string) bool {
	for _, rule := range rules {
		selector := rule.Spec.DeviceSelector
		if selector == nil {
			return true
		}
		if (selector.Driver == nil || *selector.Driver == slice.Spec.Driver) &&
			(selector.Pool == nil || *selector.Pool == slice.Spec.Pool.Name) &&
			(selector.Device == nil || *selector.Device == device) {
			return true
		}
	}
	return false
}
