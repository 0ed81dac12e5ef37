package resourceslice

import (
	"k8s.io/component-base/featuregate"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// gatedField is a field of a slice that exists only while its feature
// gates are on: inUse reports whether a slice uses it, drop removes it.
type gatedField struct {
	gates []featuregate.Feature
	inUse func(*resourceapi.ResourceSlice) bool
	drop  func(*resourceapi.ResourceSlice)
}

func gates(g ...featuregate.Feature) []featuregate.Feature { return g }

// gatedFields are the slice fields behind feature gates that can be turned
// off, in upstream's order (partitionable devices before compatibility
// groups, which live in consumesCounters).
var gatedFields = []gatedField{
	{gates(features.DRADeviceTaints),
		func(s *resourceapi.ResourceSlice) bool {
			return anyDevice(s, func(d *resourceapi.Device) bool { return len(d.Taints) > 0 })
		},
		func(s *resourceapi.ResourceSlice) {
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].Taints = nil
			}
		}},
	{gates(features.DRAPartitionableDevices), usesPartitionableDevices, dropPartitionableDevices},
	// Binding conditions are reported in the claim's device status, so
	// they need both gates, as upstream.
	{gates(features.DRADeviceBindingConditions, features.DRAResourceClaimDeviceStatus),
		func(s *resourceapi.ResourceSlice) bool {
			return anyDevice(s, func(d *resourceapi.Device) bool {
				return len(d.BindingConditions) > 0 || len(d.BindingFailureConditions) > 0 || d.BindsToNode != nil
			})
		},
		func(s *resourceapi.ResourceSlice) {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				d.BindingConditions, d.BindingFailureConditions, d.BindsToNode = nil, nil, nil
			}
		}},
	{gates(features.DRAConsumableCapacity), usesConsumableCapacity, dropConsumableCapacity},
	{gates(features.DRADeviceCompatibilityGroups), usesCompatibilityGroups, dropCompatibilityGroups},
	{gates(features.DRANodeAllocatableResources),
		func(s *resourceapi.ResourceSlice) bool {
			return anyDevice(s, func(d *resourceapi.Device) bool { return len(d.NodeAllocatableResources) > 0 })
		},
		func(s *resourceapi.ResourceSlice) {
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].NodeAllocatableResources = nil
			}
		}},
	{gates(features.DRAListTypeAttributes), usesListAttributes, dropListAttributes},
	{gates(features.DRAPartitionableDevicesType),
		func(s *resourceapi.ResourceSlice) bool { return s.Spec.PartitionTypeAttribute != nil },
		func(s *resourceapi.ResourceSlice) { s.Spec.PartitionTypeAttribute = nil }},
	{gates(features.DRAOptionalNodeOperations),
		func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.SkipNodeOperations) > 0 },
		func(s *resourceapi.ResourceSlice) { s.Spec.SkipNodeOperations = nil }},
}

func enabled(gates []featuregate.Feature) bool {
	for _, g := range gates {
		if !features.Enabled(g) {
			return false
		}
	}
	return true
}

// dropDisabledFields applies upstream's rule for fields behind a feature
// gate that is off: a create loses them; an update loses them unless the
// stored object (old) already uses them, so that turning a gate off does
// not make objects written while it was on impossible to update.
func dropDisabledFields(slice, old *resourceapi.ResourceSlice) {
	for _, f := range gatedFields {
		if enabled(f.gates) || (old != nil && f.inUse(old)) {
			continue
		}
		f.drop(slice)
	}
}

func anyDevice(s *resourceapi.ResourceSlice, pred func(*resourceapi.Device) bool) bool {
	for i := range s.Spec.Devices {
		if pred(&s.Spec.Devices[i]) {
			return true
		}
	}
	return false
}

func usesPartitionableDevices(s *resourceapi.ResourceSlice) bool {
	if len(s.Spec.SharedCounters) > 0 || s.Spec.PerDeviceNodeSelection != nil {
		return true
	}
	return anyDevice(s, func(d *resourceapi.Device) bool {
		return len(d.ConsumesCounters) > 0 || d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil
	})
}

func dropPartitionableDevices(s *resourceapi.ResourceSlice) {
	s.Spec.SharedCounters = nil
	s.Spec.PerDeviceNodeSelection = nil
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.ConsumesCounters, d.NodeName, d.NodeSelector, d.AllNodes = nil, nil, nil, nil
	}
}

func usesConsumableCapacity(s *resourceapi.ResourceSlice) bool {
	return anyDevice(s, func(d *resourceapi.Device) bool {
		if d.AllowMultipleAllocations != nil {
			return true
		}
		for _, c := range d.Capacity {
			if c.RequestPolicy != nil {
				return true
			}
		}
		return false
	})
}

func dropConsumableCapacity(s *resourceapi.ResourceSlice) {
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.AllowMultipleAllocations = nil
		for name, c := range d.Capacity {
			c.RequestPolicy = nil
			d.Capacity[name] = c
		}
	}
}

func usesCompatibilityGroups(s *resourceapi.ResourceSlice) bool {
	return anyDevice(s, func(d *resourceapi.Device) bool {
		for _, c := range d.ConsumesCounters {
			if len(c.CompatibilityGroups) > 0 {
				return true
			}
		}
		return false
	})
}

func dropCompatibilityGroups(s *resourceapi.ResourceSlice) {
	for i := range s.Spec.Devices {
		for j := range s.Spec.Devices[i].ConsumesCounters {
			s.Spec.Devices[i].ConsumesCounters[j].CompatibilityGroups = nil
		}
	}
}

func isList(attr resourceapi.DeviceAttribute) bool {
	return attr.IntValues != nil || attr.BoolValues != nil || attr.StringValues != nil || attr.VersionValues != nil
}

func usesListAttributes(s *resourceapi.ResourceSlice) bool {
	return anyDevice(s, func(d *resourceapi.Device) bool {
		for _, attr := range d.Attributes {
			if isList(attr) {
				return true
			}
		}
		return false
	})
}

// dropListAttributes clears the list values of every attribute. An
// attribute that had only a list is left without a value, which
// validation then refuses naming it, as upstream does.
func dropListAttributes(s *resourceapi.ResourceSlice) {
	for i := range s.Spec.Devices {
		for name, attr := range s.Spec.Devices[i].Attributes {
			if !isList(attr) {
				continue
			}
			attr.IntValues, attr.BoolValues, attr.StringValues, attr.VersionValues = nil, nil, nil, nil
			s.Spec.Devices[i].Attributes[name] = attr
		}
	}
}
