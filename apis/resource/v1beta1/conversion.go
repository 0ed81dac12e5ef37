package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// The three places where v1beta1 is shaped differently from the hub are
// converted here; conversion-gen writes everything else.

// Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest moves the flat
// exact-request fields into hub's exactly. A request that sets flat fields
// and firstAvailable keeps both, so that validation can reject it with an
// error naming both instead of losing one of them here.
func Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest(in *DeviceRequest, out *resourceapi.DeviceRequest, s conversion.Scope) error {
	out.Name = in.Name
	out.Exactly = nil
	if hasExactFields(in) {
		exact := &resourceapi.ExactDeviceRequest{}
		exact.DeviceClassName = in.DeviceClassName
		exact.AllocationMode = resourceapi.DeviceAllocationMode(in.AllocationMode)
		exact.Count = in.Count
		exact.AdminAccess = copyBool(in.AdminAccess)
		if in.Selectors != nil {
			exact.Selectors = make([]resourceapi.DeviceSelector, len(in.Selectors))
			for i := range in.Selectors {
				if err := Convert_v1beta1_DeviceSelector_To_resource_DeviceSelector(&in.Selectors[i], &exact.Selectors[i], s); err != nil {
					return err
				}
			}
		}
		if in.Tolerations != nil {
			exact.Tolerations = make([]resourceapi.DeviceToleration, len(in.Tolerations))
			for i := range in.Tolerations {
				if err := Convert_v1beta1_DeviceToleration_To_resource_DeviceToleration(&in.Tolerations[i], &exact.Tolerations[i], s); err != nil {
					return err
				}
			}
		}
		if in.Capacity != nil {
			exact.Capacity = &resourceapi.CapacityRequirements{}
			if err := Convert_v1beta1_CapacityRequirements_To_resource_CapacityRequirements(in.Capacity, exact.Capacity, s); err != nil {
				return err
			}
		}
		if in.DerivedAttributes != nil {
			exact.DerivedAttributes = make([]resourceapi.DeviceDerivedAttribute, len(in.DerivedAttributes))
			for i := range in.DerivedAttributes {
				if err := Convert_v1beta1_DeviceDerivedAttribute_To_resource_DeviceDerivedAttribute(&in.DerivedAttributes[i], &exact.DerivedAttributes[i], s); err != nil {
					return err
				}
			}
		}
		out.Exactly = exact
	}
	out.FirstAvailable = nil
	if in.FirstAvailable != nil {
		out.FirstAvailable = make([]resourceapi.DeviceSubRequest, len(in.FirstAvailable))
		for i := range in.FirstAvailable {
			if err := Convert_v1beta1_DeviceSubRequest_To_resource_DeviceSubRequest(&in.FirstAvailable[i], &out.FirstAvailable[i], s); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasExactFields reports whether any of the flat exact-request fields is set.
func hasExactFields(in *DeviceRequest) bool {
	return in.DeviceClassName != "" || in.Selectors != nil || in.AllocationMode != "" ||
		in.Count != 0 || in.AdminAccess != nil || in.Tolerations != nil || in.Capacity != nil || in.DerivedAttributes != nil
}

// Convert_resource_DeviceRequest_To_v1beta1_DeviceRequest flattens hub's
// exactly into the request.
func Convert_resource_DeviceRequest_To_v1beta1_DeviceRequest(in *resourceapi.DeviceRequest, out *DeviceRequest, s conversion.Scope) error {
	*out = DeviceRequest{Name: in.Name}
	if exact := in.Exactly; exact != nil {
		out.DeviceClassName = exact.DeviceClassName
		out.AllocationMode = DeviceAllocationMode(exact.AllocationMode)
		out.Count = exact.Count
		out.AdminAccess = copyBool(exact.AdminAccess)
		if exact.Selectors != nil {
			out.Selectors = make([]DeviceSelector, len(exact.Selectors))
			for i := range exact.Selectors {
				if err := Convert_resource_DeviceSelector_To_v1beta1_DeviceSelector(&exact.Selectors[i], &out.Selectors[i], s); err != nil {
					return err
				}
			}
		}
		if exact.Tolerations != nil {
			out.Tolerations = make([]DeviceToleration, len(exact.Tolerations))
			for i := range exact.Tolerations {
				if err := Convert_resource_DeviceToleration_To_v1beta1_DeviceToleration(&exact.Tolerations[i], &out.Tolerations[i], s); err != nil {
					return err
				}
			}
		}
		if exact.Capacity != nil {
			out.Capacity = &CapacityRequirements{}
			if err := Convert_resource_CapacityRequirements_To_v1beta1_CapacityRequirements(exact.Capacity, out.Capacity, s); err != nil {
				return err
			}
		}
		if exact.DerivedAttributes != nil {
			out.DerivedAttributes = make([]DeviceDerivedAttribute, len(exact.DerivedAttributes))
			for i := range exact.DerivedAttributes {
				if err := Convert_resource_DeviceDerivedAttribute_To_v1beta1_DeviceDerivedAttribute(&exact.DerivedAttributes[i], &out.DerivedAttributes[i], s); err != nil {
					return err
				}
			}
		}
	}
	if in.FirstAvailable != nil {
		out.FirstAvailable = make([]DeviceSubRequest, len(in.FirstAvailable))
		for i := range in.FirstAvailable {
			if err := Convert_resource_DeviceSubRequest_To_v1beta1_DeviceSubRequest(&in.FirstAvailable[i], &out.FirstAvailable[i], s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Convert_v1beta1_Device_To_resource_Device unwraps basic.
func Convert_v1beta1_Device_To_resource_Device(in *Device, out *resourceapi.Device, s conversion.Scope) error {
	*out = resourceapi.Device{Name: in.Name}
	if in.Basic == nil {
		return nil
	}
	var flat resourceapi.Device
	if err := convertBasicToHub(in.Basic, &flat, s); err != nil {
		return err
	}
	flat.Name = in.Name
	*out = flat
	return nil
}

// Convert_resource_Device_To_v1beta1_Device wraps the device's properties
// in basic. Basic is always set: in v1beta1 it is the only device type.
func Convert_resource_Device_To_v1beta1_Device(in *resourceapi.Device, out *Device, s conversion.Scope) error {
	out.Name = in.Name
	out.Basic = &BasicDevice{}
	return convertHubToBasic(in, out.Basic, s)
}

func convertBasicToHub(in *BasicDevice, out *resourceapi.Device, s conversion.Scope) error {
	if in.Attributes != nil {
		out.Attributes = make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(in.Attributes))
		for name, attr := range in.Attributes {
			var converted resourceapi.DeviceAttribute
			if err := Convert_v1beta1_DeviceAttribute_To_resource_DeviceAttribute(&attr, &converted, s); err != nil {
				return err
			}
			out.Attributes[resourceapi.QualifiedName(name)] = converted
		}
	}
	if in.Capacity != nil {
		out.Capacity = make(map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, len(in.Capacity))
		for name, capacity := range in.Capacity {
			var converted resourceapi.DeviceCapacity
			if err := Convert_v1beta1_DeviceCapacity_To_resource_DeviceCapacity(&capacity, &converted, s); err != nil {
				return err
			}
			out.Capacity[resourceapi.QualifiedName(name)] = converted
		}
	}
	if in.ConsumesCounters != nil {
		out.ConsumesCounters = make([]resourceapi.DeviceCounterConsumption, len(in.ConsumesCounters))
		for i := range in.ConsumesCounters {
			if err := Convert_v1beta1_DeviceCounterConsumption_To_resource_DeviceCounterConsumption(&in.ConsumesCounters[i], &out.ConsumesCounters[i], s); err != nil {
				return err
			}
		}
	}
	out.NodeName = copyString(in.NodeName)
	out.NodeSelector = in.NodeSelector.DeepCopy()
	out.AllNodes = copyBool(in.AllNodes)
	if in.Taints != nil {
		out.Taints = make([]resourceapi.DeviceTaint, len(in.Taints))
		for i := range in.Taints {
			if err := Convert_v1beta1_DeviceTaint_To_resource_DeviceTaint(&in.Taints[i], &out.Taints[i], s); err != nil {
				return err
			}
		}
	}
	out.BindsToNode = copyBool(in.BindsToNode)
	out.BindingConditions = copyStrings(in.BindingConditions)
	out.BindingFailureConditions = copyStrings(in.BindingFailureConditions)
	out.AllowMultipleAllocations = copyBool(in.AllowMultipleAllocations)
	if in.NodeAllocatableResources != nil {
		out.NodeAllocatableResources = make(map[corev1.ResourceName]resourceapi.NodeAllocatableResource, len(in.NodeAllocatableResources))
		for name, res := range in.NodeAllocatableResources {
			var converted resourceapi.NodeAllocatableResource
			if err := Convert_v1beta1_NodeAllocatableResource_To_resource_NodeAllocatableResource(&res, &converted, s); err != nil {
				return err
			}
			out.NodeAllocatableResources[name] = converted
		}
	}
	return nil
}

func convertHubToBasic(in *resourceapi.Device, out *BasicDevice, s conversion.Scope) error {
	if in.Attributes != nil {
		out.Attributes = make(map[QualifiedName]DeviceAttribute, len(in.Attributes))
		for name, attr := range in.Attributes {
			var converted DeviceAttribute
			if err := Convert_resource_DeviceAttribute_To_v1beta1_DeviceAttribute(&attr, &converted, s); err != nil {
				return err
			}
			out.Attributes[QualifiedName(name)] = converted
		}
	}
	if in.Capacity != nil {
		out.Capacity = make(map[QualifiedName]DeviceCapacity, len(in.Capacity))
		for name, capacity := range in.Capacity {
			var converted DeviceCapacity
			if err := Convert_resource_DeviceCapacity_To_v1beta1_DeviceCapacity(&capacity, &converted, s); err != nil {
				return err
			}
			out.Capacity[QualifiedName(name)] = converted
		}
	}
	if in.ConsumesCounters != nil {
		out.ConsumesCounters = make([]DeviceCounterConsumption, len(in.ConsumesCounters))
		for i := range in.ConsumesCounters {
			if err := Convert_resource_DeviceCounterConsumption_To_v1beta1_DeviceCounterConsumption(&in.ConsumesCounters[i], &out.ConsumesCounters[i], s); err != nil {
				return err
			}
		}
	}
	out.NodeName = copyString(in.NodeName)
	out.NodeSelector = in.NodeSelector.DeepCopy()
	out.AllNodes = copyBool(in.AllNodes)
	if in.Taints != nil {
		out.Taints = make([]DeviceTaint, len(in.Taints))
		for i := range in.Taints {
			if err := Convert_resource_DeviceTaint_To_v1beta1_DeviceTaint(&in.Taints[i], &out.Taints[i], s); err != nil {
				return err
			}
		}
	}
	out.BindsToNode = copyBool(in.BindsToNode)
	out.BindingConditions = copyStrings(in.BindingConditions)
	out.BindingFailureConditions = copyStrings(in.BindingFailureConditions)
	out.AllowMultipleAllocations = copyBool(in.AllowMultipleAllocations)
	if in.NodeAllocatableResources != nil {
		out.NodeAllocatableResources = make(map[corev1.ResourceName]NodeAllocatableResource, len(in.NodeAllocatableResources))
		for name, res := range in.NodeAllocatableResources {
			var converted NodeAllocatableResource
			if err := Convert_resource_NodeAllocatableResource_To_v1beta1_NodeAllocatableResource(&res, &converted, s); err != nil {
				return err
			}
			out.NodeAllocatableResources[name] = converted
		}
	}
	return nil
}

// Convert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec maps the
// plain nodeName string and allNodes bool to hub's pointers: the zero
// value means "not set".
func Convert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec(in *ResourceSliceSpec, out *resourceapi.ResourceSliceSpec, s conversion.Scope) error {
	if err := autoConvert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec(in, out, s); err != nil {
		return err
	}
	out.NodeName = nil
	if in.NodeName != "" {
		name := in.NodeName
		out.NodeName = &name
	}
	out.AllNodes = nil
	if in.AllNodes {
		all := true
		out.AllNodes = &all
	}
	return nil
}

// Convert_resource_ResourceSliceSpec_To_v1beta1_ResourceSliceSpec maps
// hub's pointers to v1beta1's plain values.
func Convert_resource_ResourceSliceSpec_To_v1beta1_ResourceSliceSpec(in *resourceapi.ResourceSliceSpec, out *ResourceSliceSpec, s conversion.Scope) error {
	if err := autoConvert_resource_ResourceSliceSpec_To_v1beta1_ResourceSliceSpec(in, out, s); err != nil {
		return err
	}
	out.NodeName = ""
	if in.NodeName != nil {
		out.NodeName = *in.NodeName
	}
	out.AllNodes = in.AllNodes != nil && *in.AllNodes
	return nil
}

func copyBool(in *bool) *bool {
	if in == nil {
		return nil
	}
	v := *in
	return &v
}

func copyString(in *string) *string {
	if in == nil {
		return nil
	}
	v := *in
	return &v
}

func copyStrings(in []string) []string {
	if in == nil {
		return nil
	}
	return append([]string(nil), in...)
}
