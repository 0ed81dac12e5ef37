package resourceslice

import (
	"k8s.io/component-base/featuregate"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/features"
)

// gatedField is a field of a slice that exists only while its feature gate
// is on: inUse reports whether a slice uses it, drop removes it.
type gatedField struct {
	gate  featuregate.Feature
	inUse func(*resourceapi.ResourceSlice) bool
	drop  func(*resourceapi.ResourceSlice)
}

// gatedFields are the slice fields behind alpha feature gates.
var gatedFields = []gatedField{
	{features.DRAPartitionableDevicesType,
		func(s *resourceapi.ResourceSlice) bool { return s.Spec.PartitionTypeAttribute != nil },
		func(s *resourceapi.ResourceSlice) { s.Spec.PartitionTypeAttribute = nil }},
	{features.DRAOptionalNodeOperations,
		func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.SkipNodeOperations) > 0 },
		func(s *resourceapi.ResourceSlice) { s.Spec.SkipNodeOperations = nil }},
	{features.DRADeviceCompatibilityGroups, usesCompatibilityGroups, dropCompatibilityGroups},
	{features.DRANodeAllocatableResources,
		func(s *resourceapi.ResourceSlice) bool {
			return anyDevice(s, func(d *resourceapi.Device) bool { return len(d.NodeAllocatableResources) > 0 })
		},
		func(s *resourceapi.ResourceSlice) {
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].NodeAllocatableResources = nil
			}
		}},
	{features.DRAListTypeAttributes, usesListAttributes, dropListAttributes},
}

// dropDisabledFields applies upstream's rule for fields behind a feature
// gate that is off: a create loses them; an update loses them unless the
// stored object (old) already uses them, so that turning a gate off does
// not make objects written while it was on impossible to update.
func dropDisabledFields(slice, old *resourceapi.ResourceSlice) {
	for _, f := range gatedFields {
		if features.Enabled(f.gate) || (old != nil && f.inUse(old)) {
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
