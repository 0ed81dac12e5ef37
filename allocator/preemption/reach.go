package preemption

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

// reachability says from which nodes a device is usable, as its slice (or,
// with perDeviceNodeSelection, the device itself) says. A device listed in
// several slices (generations of a pool) is usable where any says: more
// candidates cost search time, never a wrong answer.
type reachability map[allocator.DeviceID][]deviceNodes

type deviceNodes struct {
	nodeName string
	allNodes bool
	selector *corev1.NodeSelector
}

func newReachability(slices []*resourceapi.ResourceSlice) reachability {
	r := reachability{}
	for _, slice := range slices {
		spec := &slice.Spec
		for i := range spec.Devices {
			device := &spec.Devices[i]
			where := deviceNodes{nodeName: ptr.Deref(spec.NodeName, ""), allNodes: ptr.Deref(spec.AllNodes, false), selector: spec.NodeSelector}
			if ptr.Deref(spec.PerDeviceNodeSelection, false) {
				where = deviceNodes{nodeName: ptr.Deref(device.NodeName, ""), allNodes: ptr.Deref(device.AllNodes, false), selector: device.NodeSelector}
			}
			id := allocator.DeviceID{Driver: spec.Driver, Pool: spec.Pool.Name, Device: device.Name}
			r[id] = append(r[id], where)
		}
	}
	return r
}

// addUsableNodes adds the names of the nodes the device is usable from.
func (r reachability) addUsableNodes(id allocator.DeviceID, nodes []*corev1.Node, usable map[string]bool) {
	for _, where := range r[id] {
		switch {
		case where.allNodes:
			for _, node := range nodes {
				usable[node.Name] = true
			}
		case where.nodeName != "":
			usable[where.nodeName] = true
		case where.selector != nil:
			for _, node := range nodes {
				if nodeaffinity.NodeSelectorMatches(where.selector, node) {
					usable[node.Name] = true
				}
			}
		}
	}
}
