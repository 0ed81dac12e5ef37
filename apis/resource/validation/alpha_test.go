package validation

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// partitionedSlice: two devices that consume counters, with a string
// attribute "profile" naming their partition type.
func partitionedSlice() *resourceapi.ResourceSlice {
	s := validSlice()
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("set-0")}
		s.Spec.Devices[i].Attributes["profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To("Full")}
	}
	return s
}

func TestValidateSliceAlphaFields(t *testing.T) {
	const dev0 = "spec.devices[0]"
	const nodeAlloc = dev0 + ".nodeAllocatableResources"
	ops := func(values ...resourceapi.SkipNodeOperation) func(*resourceapi.ResourceSlice) {
		return func(s *resourceapi.ResourceSlice) { s.Spec.SkipNodeOperations = values }
	}
	attr := func(a resourceapi.DeviceAttribute) func(*resourceapi.ResourceSlice) {
		return func(s *resourceapi.ResourceSlice) { s.Spec.Devices[0].Attributes["list"] = a }
	}
	partitionType := func(name resourceapi.FullyQualifiedName) *resourceapi.FullyQualifiedName { return &name }
	nodeAllocatable := func(name corev1.ResourceName, res resourceapi.NodeAllocatableResource) func(*resourceapi.ResourceSlice) {
		return func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourceapi.NodeAllocatableResource{name: res}
		}
	}
	tests := map[string]struct {
		slice  func() *resourceapi.ResourceSlice
		mutate func(*resourceapi.ResourceSlice)
		want   []string
	}{
		"skip all":                {mutate: ops("*")},
		"skip prepare and unprep": {mutate: ops("NodePrepareResources", "NodeUnprepareResources")},
		"skip unprepare":          {mutate: ops("NodeUnprepareResources")},
		"skip unknown":            {mutate: ops("SomethingNew")},
		"skip prepare alone":      {mutate: ops("NodePrepareResources"), want: []string{invalid("spec.skipNodeOperations")}},
		"skip duplicate":          {mutate: ops("*", "*"), want: []string{duplicate("spec.skipNodeOperations[1]")}},
		"partition type": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = partitionType(testDriver + "/profile")
		}},
		"partition type no domain": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) { s.Spec.PartitionTypeAttribute = partitionType("profile") }, want: []string{invalid("spec.partitionTypeAttribute")}},
		"partition type no counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = partitionType(testDriver + "/model")
		},
			want: []string{invalid("spec.partitionTypeAttribute")}},
		"partition type missing": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = partitionType("other.example.com/profile")
		},
			want: []string{required(dev0 + ".attributes[other.example.com/profile]"), required("spec.devices[1].attributes[other.example.com/profile]")}},
		"partition type not a string": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = partitionType(testDriver + "/healthy")
		}, want: []string{invalid(dev0 + ".attributes[" + testDriver + "/healthy]"), invalid("spec.devices[1].attributes[" + testDriver + "/healthy]")}},

		"ints":             {mutate: attr(resourceapi.DeviceAttribute{IntValues: []int64{0, 1}})},
		"bools":            {mutate: attr(resourceapi.DeviceAttribute{BoolValues: []bool{true}})},
		"strings":          {mutate: attr(resourceapi.DeviceAttribute{StringValues: []string{"a", "b"}})},
		"versions":         {mutate: attr(resourceapi.DeviceAttribute{VersionValues: []string{"1.0.0", "2.0.0-rc.1"}})},
		"empty ints":       {mutate: attr(resourceapi.DeviceAttribute{IntValues: []int64{}}), want: []string{invalid(dev0 + ".attributes[list].ints")}},
		"long string item": {mutate: attr(resourceapi.DeviceAttribute{StringValues: []string{"a", strings.Repeat("x", 65)}}), want: []string{tooLong(dev0 + ".attributes[list].strings[1]")}},
		"bad version item": {mutate: attr(resourceapi.DeviceAttribute{VersionValues: []string{"1.0"}}), want: []string{invalid(dev0 + ".attributes[list].versions[0]")}},
		"list and scalar":  {mutate: attr(resourceapi.DeviceAttribute{IntValues: []int64{1}, IntValue: ptr.To[int64](1)}), want: []string{invalid(dev0 + ".attributes[list]")}},
		"two lists":        {mutate: attr(resourceapi.DeviceAttribute{IntValues: []int64{1}, BoolValues: []bool{true}}), want: []string{invalid(dev0 + ".attributes[list]")}},
		"48 values":        {mutate: attr(resourceapi.DeviceAttribute{IntValues: make([]int64, 44)})},
		"49 values":        {mutate: attr(resourceapi.DeviceAttribute{IntValues: make([]int64, 45)}), want: []string{invalid(dev0)}},
		"compat groups": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"a", "b"}
		}, want: []string{forbidden(dev0 + ".consumesCounters[0].compatibilityGroups")}},
		"compat groups bad": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"A", "b", "c"}
		}, want: []string{tooMany(dev0 + ".consumesCounters[0].compatibilityGroups"), forbidden(dev0 + ".consumesCounters[0].compatibilityGroups")}},
		"compat groups dup": {slice: partitionedSlice, mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"a", "a"}
		}, want: []string{duplicate(dev0 + ".consumesCounters[0].compatibilityGroups[1]"), forbidden(dev0 + ".consumesCounters[0].compatibilityGroups")}},

		"node allocatable overhead": {mutate: nodeAllocatable("memory", resourceapi.NodeAllocatableResource{Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: quantity("1Gi")}}),
			want: []string{forbidden(nodeAlloc)}},
		"node allocatable mapping": {mutate: nodeAllocatable("cpu", resourceapi.NodeAllocatableResource{Mapping: &resourceapi.NodeAllocatableMapping{CapacityKey: ptr.To[resourceapi.QualifiedName]("memory"), CapacityMultiplier: quantity("2")}}),
			want: []string{forbidden(nodeAlloc)}},
		"node allocatable extended": {mutate: nodeAllocatable("example.com/foo", resourceapi.NodeAllocatableResource{Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: quantity("1")}}),
			want: []string{invalid(nodeAlloc + "[example.com/foo]"), forbidden(nodeAlloc)}},
		"node allocatable empty": {mutate: nodeAllocatable("cpu", resourceapi.NodeAllocatableResource{}),
			want: []string{required(nodeAlloc + "[cpu]"), forbidden(nodeAlloc)}},
		"node allocatable bad mapping": {mutate: nodeAllocatable("cpu", resourceapi.NodeAllocatableResource{Mapping: &resourceapi.NodeAllocatableMapping{CapacityKey: ptr.To[resourceapi.QualifiedName]("nope"), DeviceMultiplier: quantity("0")}}),
			want: []string{notFound(nodeAlloc + "[cpu].mapping.capacityKey"), required(nodeAlloc + "[cpu].mapping.capacityMultiplier"), invalid(nodeAlloc + "[cpu].mapping.deviceMultiplier"), forbidden(nodeAlloc)}},
		"node allocatable multiplier alone": {mutate: nodeAllocatable("cpu", resourceapi.NodeAllocatableResource{Mapping: &resourceapi.NodeAllocatableMapping{CapacityMultiplier: quantity("-1")}}),
			want: []string{required(nodeAlloc + "[cpu].mapping.capacityKey"), invalid(nodeAlloc + "[cpu].mapping.capacityMultiplier"), forbidden(nodeAlloc)}},
		"node allocatable bad overhead": {mutate: nodeAllocatable("hugepages-2Mi", resourceapi.NodeAllocatableResource{Overhead: &resourceapi.NodeAllocatableOverhead{}}),
			want: []string{invalid(nodeAlloc + "[hugepages-2Mi].overhead"), forbidden(nodeAlloc)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			newSlice := validSlice
			if tc.slice != nil {
				newSlice = tc.slice
			}
			slice := newSlice()
			tc.mutate(slice)
			assertErrors(t, ValidateResourceSlice(slice), tc.want)
		})
	}
}

// Fields refused because the allocator does not implement them are
// refused only when newly set: an update of a slice that already has them
// is not refused for them again.
func TestRefusedSliceFieldsRatchet(t *testing.T) {
	old := partitionedSlice()
	old.ResourceVersion = "1"
	old.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"a"}
	old.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourceapi.NodeAllocatableResource{
		"memory": {Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: quantity("1Gi")}},
	}
	updated := old.DeepCopy()
	updated.Labels = map[string]string{"changed": "true"}
	assertErrors(t, ValidateResourceSliceUpdate(updated, old), nil)
	assertErrors(t, ValidateResourceSlice(updated), []string{
		forbidden("spec.devices[0].consumesCounters[0].compatibilityGroups"),
		forbidden("spec.devices[0].nodeAllocatableResources"),
	})
}

func TestValidateDerivedAttributes(t *testing.T) {
	const exact = "spec.devices.requests[0].exactly.derivedAttributes"
	const sub = "spec.devices.requests[1].firstAvailable[0].derivedAttributes"
	derived := func(name, expr string) resourceapi.DeviceDerivedAttribute {
		return resourceapi.DeviceDerivedAttribute{Name: resourceapi.FullyQualifiedName(name), Expression: expr}
	}
	tests := map[string]struct {
		mutate func(*resourceapi.ResourceClaim)
		want   []string
	}{
		"used by constraint": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("example.com/numa", "1")}
		}, want: []string{forbidden(exact)}},
		"subrequest, used by constraint": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[1].FirstAvailable[0].DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("example.com/numa", "1")}
		}, want: []string{forbidden(sub)}},
		"not used": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("derived/other", "1")}
		}, want: []string{invalid(exact + "[0].name"), forbidden(exact)}},
		"no domain, no expression": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("numa", "")}
		}, want: []string{invalid(exact + "[0].name"), required(exact + "[0].expression"), forbidden(exact)}},
		"duplicate": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("example.com/numa", "1"), derived("example.com/numa", "2")}
		}, want: []string{duplicate(exact + "[1]"), forbidden(exact)}},
		"too long": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = []resourceapi.DeviceDerivedAttribute{derived("example.com/numa", strings.Repeat("1", 10*1024+1))}
		}, want: []string{tooLong(exact + "[0].expression"), forbidden(exact)}},
		"too many": {mutate: func(c *resourceapi.ResourceClaim) {
			for i := range 33 {
				c.Spec.Devices.Requests[0].Exactly.DerivedAttributes = append(c.Spec.Devices.Requests[0].Exactly.DerivedAttributes, derived(fmt.Sprintf("example.com/a%d", i), "1"))
			}
		}, want: []string{tooMany(exact), forbidden(exact)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := validClaim()
			tc.mutate(claim)
			errs := ValidateResourceClaim(claim)
			assertErrors(t, errs, tc.want)
			for _, err := range errs {
				if err.Type == field.ErrorTypeForbidden && !strings.Contains(err.Detail, "not supported yet") {
					t.Errorf("refusal %q does not say the field is not supported yet", err.Detail)
				}
			}
		})
	}
}

func TestSkipNodeOperationsInAllocation(t *testing.T) {
	claim := allocatedClaim()
	updated := claim.DeepCopy()
	updated.Status.Allocation.Devices.Results[0].SkipNodeOperations = []resourceapi.SkipNodeOperation{"NodePrepareResources"}
	claim.Status.Allocation = nil
	claim.Status.Devices = nil
	claim.Status.ReservedFor = nil
	assertErrors(t, ValidateResourceClaimStatusUpdate(updated, claim), []string{invalid("status.allocation.devices.results[0].skipNodeOperations")})
}
