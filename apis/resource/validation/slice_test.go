package validation

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

func device(name string) resourceapi.Device {
	return resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"model":            {StringValue: ptr.To("a100")},
			"example.com/numa": {IntValue: ptr.To[int64](0)},
			"driverVersion":    {VersionValue: ptr.To("1.2.3-rc.1+build.5")},
			"healthy":          {BoolValue: ptr.To(true)},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse("40Gi")},
		},
	}
}

func devices(n int) []resourceapi.Device {
	out := make([]resourceapi.Device, n)
	for i := range out {
		out[i] = resourceapi.Device{Name: fmt.Sprintf("dev-%d", i)}
	}
	return out
}

func validSlice() *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu.example.com"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   testDriver,
			Pool:     resourceapi.ResourcePool{Name: testPool, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To("node-1"),
			Devices:  []resourceapi.Device{device("gpu-0"), device("gpu-1")},
		},
	}
}

func taint() resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{Key: "example.com/unhealthy", Effect: resourceapi.DeviceTaintEffectNoSchedule}
}

func counters(n int) map[string]resourceapi.Counter {
	out := make(map[string]resourceapi.Counter, n)
	for i := range n {
		out[fmt.Sprintf("c-%d", i)] = resourceapi.Counter{Value: resource.MustParse("1")}
	}
	return out
}

func counterSets(n int) []resourceapi.CounterSet {
	out := make([]resourceapi.CounterSet, n)
	for i := range out {
		out[i] = resourceapi.CounterSet{Name: fmt.Sprintf("set-%d", i), Counters: counters(1)}
	}
	return out
}

func consumption(set string) resourceapi.DeviceCounterConsumption {
	return resourceapi.DeviceCounterConsumption{CounterSet: set, Counters: counters(1)}
}

func quantity(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

func quantities(values ...string) []resource.Quantity {
	out := make([]resource.Quantity, len(values))
	for i, v := range values {
		out[i] = resource.MustParse(v)
	}
	return out
}

// sharedMemory makes the first device shareable with a memory capacity
// of 40Gi and the given policy.
func sharedMemory(s *resourceapi.ResourceSlice, policy *resourceapi.CapacityRequestPolicy) {
	s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	s.Spec.Devices[0].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("40Gi"), RequestPolicy: policy}
}

func TestValidateResourceSlice(t *testing.T) {
	const dev0 = "spec.devices[0]"
	const policy = dev0 + ".capacity[memory].requestPolicy"
	perDevice := func(s *resourceapi.ResourceSlice) {
		s.Spec.NodeName = nil
		s.Spec.PerDeviceNodeSelection = ptr.To(true)
		s.Spec.Devices[0].NodeName = ptr.To("node-1")
		s.Spec.Devices[1].AllNodes = ptr.To(true)
	}

	tests := map[string]struct {
		mutate func(*resourceapi.ResourceSlice)
		want   []string
	}{
		"valid":         {mutate: func(*resourceapi.ResourceSlice) {}},
		"no devices":    {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices = nil }},
		"namespaced":    {mutate: func(s *resourceapi.ResourceSlice) { s.Namespace = "default" }, want: []string{forbidden("metadata.namespace")}},
		"missing name":  {mutate: func(s *resourceapi.ResourceSlice) { s.Name = "" }, want: []string{required("metadata.name")}},
		"driver empty":  {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Driver = "" }, want: []string{required("spec.driver")}},
		"driver bad":    {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Driver = "gpu_example" }, want: []string{invalid("spec.driver")}},
		"driver 63":     {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Driver = strings.Repeat("a", 59) + ".com" }},
		"driver 64":     {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Driver = strings.Repeat("a", 60) + ".com" }, want: []string{tooLong("spec.driver")}},
		"pool empty":    {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Name = "" }, want: []string{required("spec.pool.name")}},
		"pool path":     {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Name = "rack-1/node-1.example.com" }},
		"pool bad":      {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Name = "node-1/" }, want: []string{invalid("spec.pool.name")}},
		"pool too long": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Name = strings.Repeat("a/", 127) + "a" }, want: []string{tooLong("spec.pool.name")}},
		"slice count 0": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.ResourceSliceCount = 0 }, want: []string{invalid("spec.pool.resourceSliceCount")}},
		"generation 0":  {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation = 0 }},
		"generation -1": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation = -1 }, want: []string{invalid("spec.pool.generation")}},

		"no node selection": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = nil }, want: []string{required("spec")}},
		"empty node name":   {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = ptr.To("") }, want: []string{invalid("spec.nodeName"), required("spec")}},
		"bad node name":     {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = ptr.To("Node_1") }, want: []string{invalid("spec.nodeName")}},
		"all nodes": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
		}},
		"all nodes false": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(false)
		}, want: []string{invalid("spec.allNodes"), required("spec")}},
		"node name and all nodes": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.AllNodes = ptr.To(true) }, want: []string{invalid("spec")}},
		"node selector": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, nodeSelector(1)
		}},
		"node selector two terms": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, nodeSelector(2)
		}, want: []string{invalid("spec.nodeSelector.nodeSelectorTerms")}},
		"node selector no terms": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, &corev1.NodeSelector{}
		}, want: []string{required("spec.nodeSelector.nodeSelectorTerms")}},
		"node selector bad requirement": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, nodeSelector(1)
			s.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions = []corev1.NodeSelectorRequirement{
				{Key: "zone", Operator: corev1.NodeSelectorOpIn},
				{Key: "zone", Operator: corev1.NodeSelectorOpExists, Values: []string{"a"}},
				{Key: "gen", Operator: corev1.NodeSelectorOpGt, Values: []string{"1", "2"}},
				{Key: "-bad", Operator: corev1.NodeSelectorOpDoesNotExist},
			}
		}, want: []string{
			required("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values"),
			forbidden("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[1].values"),
			required("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[2].values"),
			invalid("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[3].key"),
		}},
		"node selector field value not a node name": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName, s.Spec.NodeSelector = nil, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"Node_1"}}},
			}}}
		}, want: []string{invalid("spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[0]")}},
		"node selector and per-device": {mutate: func(s *resourceapi.ResourceSlice) {
			perDevice(s)
			s.Spec.NodeSelector = nodeSelector(1)
		}, want: []string{invalid("spec")}},
		"per-device selection": {mutate: perDevice},
		"per-device selection false": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.PerDeviceNodeSelection = ptr.To(false)
		}, want: []string{invalid("spec.perDeviceNodeSelection")}},
		"per-device node selector": {mutate: func(s *resourceapi.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[0].NodeName, s.Spec.Devices[0].NodeSelector = nil, nodeSelector(2)
		}},
		"per-device missing": {mutate: func(s *resourceapi.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[1].AllNodes = nil
		}, want: []string{required("spec.devices[1]")}},
		"per-device two": {mutate: func(s *resourceapi.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[0].AllNodes = ptr.To(true)
		}, want: []string{invalid(dev0)}},
		"per-device empty node name": {mutate: func(s *resourceapi.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[0].NodeName = ptr.To("")
		}, want: []string{invalid(dev0 + ".nodeName"), required(dev0)}},
		"per-device all nodes false": {mutate: func(s *resourceapi.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[1].AllNodes = ptr.To(false)
		}, want: []string{invalid("spec.devices[1].allNodes"), required("spec.devices[1]")}},
		"device node name without per-device": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].NodeName = ptr.To("node-1")
		}, want: []string{invalid(dev0)}},

		"128 devices": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices = devices(128) }},
		"129 devices": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices = devices(129) }, want: []string{tooMany("spec.devices")}},
		"64 devices, tainted": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices = devices(64)
			s.Spec.Devices[63].Taints = []resourceapi.DeviceTaint{taint()}
		}},
		"65 devices, tainted": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices = devices(65)
			s.Spec.Devices[64].Taints = []resourceapi.DeviceTaint{taint()}
		}, want: []string{tooMany("spec.devices")}},
		"65 devices, counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices = devices(65)
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("set-0")}
		}, want: []string{tooMany("spec.devices")}},
		"duplicate device":    {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices[1].Name = "gpu-0" }, want: []string{duplicate("spec.devices[1]")}},
		"missing device name": {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices[0].Name = "" }, want: []string{required(dev0 + ".name")}},
		"bad device name":     {mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices[0].Name = "gpu/0" }, want: []string{invalid(dev0 + ".name")}},

		"32 attributes and capacities": {mutate: func(s *resourceapi.ResourceSlice) {
			for i := len(s.Spec.Devices[0].Attributes) + 1; i < 32; i++ {
				s.Spec.Devices[0].Attributes[resourceapi.QualifiedName(fmt.Sprintf("a%d", i))] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
			}
		}},
		"33 attributes and capacities": {mutate: func(s *resourceapi.ResourceSlice) {
			for i := len(s.Spec.Devices[0].Attributes) + 1; i < 33; i++ {
				s.Spec.Devices[0].Attributes[resourceapi.QualifiedName(fmt.Sprintf("a%d", i))] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
			}
		}, want: []string{invalid(dev0)}},
		"attribute without value": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["empty"] = resourceapi.DeviceAttribute{}
		}, want: []string{required(dev0 + ".attributes[empty]")}},
		"attribute with two values": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["two"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1), BoolValue: ptr.To(true)}
		}, want: []string{invalid(dev0 + ".attributes[two]")}},
		"attribute string 64": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["s"] = resourceapi.DeviceAttribute{StringValue: ptr.To(strings.Repeat("x", 64))}
		}},
		"attribute string 65": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["s"] = resourceapi.DeviceAttribute{StringValue: ptr.To(strings.Repeat("x", 65))}
		}, want: []string{tooLong(dev0 + ".attributes[s].string")}},
		"attribute bad version": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["v"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("1.02.3")}
		}, want: []string{invalid(dev0 + ".attributes[v].version")}},
		"attribute version too long": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["v"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("1.2.3-" + strings.Repeat("a", 60))}
		}, want: []string{tooLong(dev0 + ".attributes[v].version")}},
		"attribute name bad identifier": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["bad-name"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
		}, want: []string{invalid(dev0 + ".attributes[bad-name]")}},
		"attribute name bad domain": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["exa_mple.com/x"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
		}, want: []string{invalid(dev0 + ".attributes[exa_mple.com/x]")}},
		"attribute name empty domain": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["/x"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
		}, want: []string{invalid(dev0 + ".attributes[/x]")}},
		"attribute name two slashes": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes["a.com/b/c"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
		}, want: []string{invalid(dev0 + ".attributes[a.com/b/c]")}},
		"attribute identifier too long": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes[resourceapi.QualifiedName(strings.Repeat("a", 33))] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)}
		}, want: []string{tooLong(dev0 + ".attributes[" + strings.Repeat("a", 33) + "]")}},
		"capacity name bad": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Capacity["1memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("1")}
		}, want: []string{invalid(dev0 + ".capacity[1memory]")}},

		"request policy without multiple allocations": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("40Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi")}}
		}, want: []string{forbidden(policy)}},
		"request policy default only": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi")})
		}},
		"request policy default over capacity": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("41Gi")})
		}, want: []string{invalid(policy + ".default")}},
		"valid values": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("10Gi"), ValidValues: quantities("10Gi", "20Gi", "40Gi")})
		}},
		"valid values without default": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{ValidValues: quantities("10Gi")})
		}, want: []string{required(policy + ".default")}},
		"valid values unsorted and duplicate": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("10Gi"), ValidValues: quantities("20Gi", "10Gi", "10Gi")})
		}, want: []string{invalid(policy + ".validValues[1]"), duplicate(policy + ".validValues[2]")}},
		"valid values over capacity, default missing": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("5Gi"), ValidValues: quantities("10Gi", "80Gi")})
		}, want: []string{invalid(policy + ".validValues[1]"), invalid(policy + ".validValues")}},
		"11 valid values": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi"), ValidValues: quantities("1Gi", "2Gi", "3Gi", "4Gi", "5Gi", "6Gi", "7Gi", "8Gi", "9Gi", "10Gi", "11Gi")})
		}, want: []string{tooMany(policy + ".validValues")}},
		"valid values and range": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi"), ValidValues: quantities("1Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Gi")}})
		}, want: []string{forbidden(policy)}},
		"valid range": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("2Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min: quantity("1Gi"), Max: quantity("33Gi"), Step: quantity("1Gi"),
			}})
		}},
		"valid range fractional step": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
			s.Spec.Devices[0].Capacity["cores"] = resourceapi.DeviceCapacity{Value: resource.MustParse("8"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default: quantity("1500m"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("500m"), Step: quantity("250m")},
			}}
		}},
		"valid range without default": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Gi")}})
		}, want: []string{required(policy + ".default")}},
		"valid range without min": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Max: quantity("2Gi")}})
		}, want: []string{required(policy + ".validRange.min")}},
		"valid range min over max and capacity": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("50Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("50Gi"), Max: quantity("45Gi")}})
		}, want: []string{invalid(policy + ".validRange.min"), invalid(policy + ".validRange.max"), invalid(policy + ".validRange.default")}},
		"valid range default below min": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("2Gi")}})
		}, want: []string{invalid(policy + ".validRange.default")}},
		"valid range zero step": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Gi"), Step: quantity("0")}})
		}, want: []string{invalid(policy + ".validRange.step")}},
		"valid range step too large": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Gi"), Step: quantity("40Gi")}})
		}, want: []string{invalid(policy + ".validRange.step")}},
		"valid range off-step default and max": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("3Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min: quantity("1Gi"), Max: quantity("10Gi"), Step: quantity("2Gi"),
			}})
		}, want: []string{invalid(policy + ".validRange.step")}},
		"valid range default not on step": {mutate: func(s *resourceapi.ResourceSlice) {
			sharedMemory(s, &resourceapi.CapacityRequestPolicy{Default: quantity("2Gi"), ValidRange: &resourceapi.CapacityRequestPolicyRange{
				Min: quantity("1Gi"), Step: quantity("2Gi"),
			}})
		}, want: []string{invalid(policy + ".validRange.step")}},

		"16 taints": {mutate: func(s *resourceapi.ResourceSlice) {
			for range 16 {
				s.Spec.Devices[0].Taints = append(s.Spec.Devices[0].Taints, taint())
			}
		}},
		"17 taints": {mutate: func(s *resourceapi.ResourceSlice) {
			for range 17 {
				s.Spec.Devices[0].Taints = append(s.Spec.Devices[0].Taints, taint())
			}
		}, want: []string{tooMany(dev0 + ".taints")}},
		"bad taint": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Value: "-x-"}, {Key: "k", Effect: "Evict", TimeAdded: ptr.To(metav1.Now())}}
		}, want: []string{invalid(dev0 + ".taints[0].key"), invalid(dev0 + ".taints[0].value"), required(dev0 + ".taints[0].effect"), notSupported(dev0 + ".taints[1].effect")}},

		"binding conditions": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].BindingConditions = []string{"Attached"}
			s.Spec.Devices[0].BindingFailureConditions = []string{"AttachFailed"}
			s.Spec.Devices[0].BindsToNode = ptr.To(true)
		}},
		"binding conditions invalid": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].BindingConditions = []string{"Attached", "not valid"}
		}, want: []string{invalid(dev0 + ".bindingConditions[1]"), required(dev0 + ".bindingFailureConditions")}},
		"5 binding failure conditions": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].BindingConditions = []string{"Attached"}
			s.Spec.Devices[0].BindingFailureConditions = []string{"A", "B", "C", "D", "E"}
		}, want: []string{tooMany(dev0 + ".bindingFailureConditions")}},

		"counter consumption": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("set-0"), {CounterSet: "set-1", Counters: counters(32)}}
		}},
		"3 counter consumptions": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("set-0"), consumption("set-1"), consumption("set-2")}
		}, want: []string{tooMany(dev0 + ".consumesCounters")}},
		"duplicate counter consumption": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{consumption("set-0"), consumption("set-0")}
		}, want: []string{duplicate(dev0 + ".consumesCounters[1]")}},
		"counter consumption without counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "Set"}}
		}, want: []string{invalid(dev0 + ".consumesCounters[0].counterSet"), required(dev0 + ".consumesCounters[0].counters")}},
		"counter consumption 33 counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "set-0", Counters: counters(33)}}
		}, want: []string{tooMany(dev0 + ".consumesCounters[0].counters")}},
		"counter consumption bad counter name": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "set-0", Counters: map[string]resourceapi.Counter{"Mem": {}}}}
		}, want: []string{invalid(dev0 + ".consumesCounters[0].counters[Mem]")}},

		"shared counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices = nil
			s.Spec.SharedCounters = counterSets(8)
			s.Spec.SharedCounters[0].Counters = counters(32)
		}},
		"shared counters and devices": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.SharedCounters = counterSets(1)
		}, want: []string{invalid("spec")}},
		"9 counter sets": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices, s.Spec.SharedCounters = nil, counterSets(9)
		}, want: []string{tooMany("spec.sharedCounters")}},
		"33 counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices, s.Spec.SharedCounters = nil, counterSets(1)
			s.Spec.SharedCounters[0].Counters = counters(33)
		}, want: []string{tooMany("spec.sharedCounters[0].counters")}},
		"duplicate counter set": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices, s.Spec.SharedCounters = nil, counterSets(2)
			s.Spec.SharedCounters[1].Name = "set-0"
		}, want: []string{duplicate("spec.sharedCounters[1]")}},
		"counter set without name and counters": {mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices, s.Spec.SharedCounters = nil, []resourceapi.CounterSet{{}}
		}, want: []string{required("spec.sharedCounters[0].name"), required("spec.sharedCounters[0].counters")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			slice := validSlice()
			tc.mutate(slice)
			assertErrors(t, ValidateResourceSlice(slice), tc.want)
		})
	}
}

func TestValidateResourceSliceUpdate(t *testing.T) {
	// storedSlice has a request policy on a device that does not allow
	// multiple allocations and a taint with a retired effect: both were
	// accepted once and must not block unrelated updates.
	storedSlice := func() *resourceapi.ResourceSlice {
		slice := validSlice()
		slice.Spec.Devices[0].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("40Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi")}}
		slice.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: "Retired"}}
		return slice
	}
	tests := map[string]struct {
		old    *resourceapi.ResourceSlice
		mutate func(*resourceapi.ResourceSlice)
		want   []string
	}{
		"new generation":   {old: validSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation++ }},
		"add device":       {old: validSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices = append(s.Spec.Devices, device("gpu-2")) }},
		"driver change":    {old: validSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Driver = "other.example.com" }, want: []string{invalid("spec.driver")}},
		"pool change":      {old: validSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Name = "node-2" }, want: []string{invalid("spec.pool.name")}},
		"node change":      {old: validSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = ptr.To("node-2") }, want: []string{invalid("spec.nodeName")}},
		"invalid device":   {old: validSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices[1].Name = "GPU" }, want: []string{invalid("spec.devices[1].name")}},
		"stored unchanged": {old: storedSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Pool.Generation++ }},
		"stored capacity changed": {old: storedSlice(), mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("80Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi")}}
		}, want: []string{forbidden("spec.devices[0].capacity[memory].requestPolicy")}},
		"stored taints changed": {old: storedSlice(), mutate: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Taints = append(s.Spec.Devices[0].Taints, taint())
		}, want: []string{notSupported("spec.devices[0].taints[0].effect")}},
		"stored device renamed is new": {old: storedSlice(), mutate: func(s *resourceapi.ResourceSlice) { s.Spec.Devices[0].Name = "gpu-9" }, want: []string{
			forbidden("spec.devices[0].capacity[memory].requestPolicy"), notSupported("spec.devices[0].taints[0].effect"),
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.old.ResourceVersion = "1"
			slice := tc.old.DeepCopy()
			tc.mutate(slice)
			assertErrors(t, ValidateResourceSliceUpdate(slice, tc.old), tc.want)
		})
	}
}
