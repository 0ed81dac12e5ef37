package resourceslice

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/testing/apitest"
)

var added = metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Per gated field: a mutation that sets it, and what the field is in a
// slice (nil when absent).
var gatedSliceFields = []struct {
	name string
	gate featuregate.Feature
	set  func(*resourceapi.ResourceSlice)
	get  func(*resourceapi.ResourceSlice) any
}{
	{"taints", features.DRADeviceTaints,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: &added}}
		},
		func(s *resourceapi.ResourceSlice) any { return nilIfEmpty(s.Spec.Devices[0].Taints) }},
	{"partitionable devices", features.DRAPartitionableDevices,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.NodeName = nil
			s.Spec.PerDeviceNodeSelection = ptr.To(true)
			s.Spec.Devices[0].NodeName = ptr.To("node-1")
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
				CounterSet: "set", Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse("1")}},
			}}
		},
		func(s *resourceapi.ResourceSlice) any {
			if s.Spec.PerDeviceNodeSelection == nil && s.Spec.Devices[0].NodeName == nil && s.Spec.Devices[0].ConsumesCounters == nil {
				return nil
			}
			return []any{s.Spec.PerDeviceNodeSelection, s.Spec.Devices[0].NodeName, s.Spec.Devices[0].ConsumesCounters}
		}},
	{"binding conditions", features.DRADeviceBindingConditions,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].BindingConditions = []string{"attached"}
			s.Spec.Devices[0].BindingFailureConditions = []string{"failed"}
			s.Spec.Devices[0].BindsToNode = ptr.To(true)
		},
		func(s *resourceapi.ResourceSlice) any {
			d := s.Spec.Devices[0]
			if d.BindingConditions == nil && d.BindingFailureConditions == nil && d.BindsToNode == nil {
				return nil
			}
			return []any{d.BindingConditions, d.BindingFailureConditions, d.BindsToNode}
		}},
	{"consumable capacity", features.DRAConsumableCapacity,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
			s.Spec.Devices[0].Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"bw": {Value: resource.MustParse("10"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1"))}},
			}
		},
		func(s *resourceapi.ResourceSlice) any {
			d := s.Spec.Devices[0]
			if d.AllowMultipleAllocations == nil && d.Capacity["bw"].RequestPolicy == nil {
				return nil
			}
			return []any{d.AllowMultipleAllocations, d.Capacity["bw"].RequestPolicy}
		}},
	{"partitionTypeAttribute", features.DRAPartitionableDevicesType,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.PartitionTypeAttribute = ptr.To[resourceapi.FullyQualifiedName]("gpu.example.com/profile")
		},
		func(s *resourceapi.ResourceSlice) any { return s.Spec.PartitionTypeAttribute }},
	{"skipNodeOperations", features.DRAOptionalNodeOperations,
		func(s *resourceapi.ResourceSlice) { s.Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{"*"} },
		func(s *resourceapi.ResourceSlice) any { return s.Spec.SkipNodeOperations }},
	{"compatibilityGroups", features.DRADeviceCompatibilityGroups,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
				CounterSet: "set", Counters: map[string]resourceapi.Counter{"memory": {Value: resource.MustParse("1")}},
				CompatibilityGroups: []string{"a"},
			}}
		},
		func(s *resourceapi.ResourceSlice) any {
			if len(s.Spec.Devices[0].ConsumesCounters) == 0 {
				return nil
			}
			return s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups
		}},
	{"nodeAllocatableResources", features.DRANodeAllocatableResources,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourceapi.NodeAllocatableResource{
				"memory": {Overhead: &resourceapi.NodeAllocatableOverhead{PerPod: ptr.To(resource.MustParse("1Gi"))}},
			}
		},
		func(s *resourceapi.ResourceSlice) any { return s.Spec.Devices[0].NodeAllocatableResources }},
	{"list attributes", features.DRAListTypeAttributes,
		func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[0].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"cores":    {IntValues: []int64{0, 1}},
				"flags":    {BoolValues: []bool{true}},
				"models":   {StringValues: []string{"a"}},
				"firmware": {VersionValues: []string{"1.0.0"}},
			}
		},
		func(s *resourceapi.ResourceSlice) any {
			var lists []any
			for _, name := range []resourceapi.QualifiedName{"cores", "flags", "models", "firmware"} {
				attr := s.Spec.Devices[0].Attributes[name]
				for _, l := range []any{attr.IntValues, attr.BoolValues, attr.StringValues, attr.VersionValues} {
					if !isNil(l) {
						lists = append(lists, l)
					}
				}
			}
			if len(lists) == 0 {
				return nil
			}
			return lists
		}},
}

func nilIfEmpty(taints []resourceapi.DeviceTaint) any {
	if taints == nil {
		return nil
	}
	return taints
}

func isNil(v any) bool {
	switch l := v.(type) {
	case []int64:
		return l == nil
	case []bool:
		return l == nil
	case []string:
		return l == nil
	}
	return v == nil
}

func present(v any) bool {
	switch p := v.(type) {
	case *resourceapi.FullyQualifiedName:
		return p != nil
	case []resourceapi.SkipNodeOperation:
		return p != nil
	case []string:
		return p != nil
	case map[corev1.ResourceName]resourceapi.NodeAllocatableResource:
		return p != nil
	}
	return v != nil
}

// TestDropDisabledFields: with its gate off a field is dropped on create
// and on an update of a slice that does not use it yet, and kept on an
// update of a slice that already uses it; with the gate on it is kept.
func TestDropDisabledFields(t *testing.T) {
	strategy := NewStrategy(apitest.Scheme())
	ctx := context.Background()
	for _, field := range gatedSliceFields {
		for _, tc := range []struct {
			name     string
			gate     bool
			update   bool // else create
			oldUses  bool
			wantKept bool
		}{
			{name: "create, gate on", gate: true, wantKept: true},
			{name: "create, gate off", gate: false, wantKept: false},
			{name: "update, gate on", gate: true, update: true, wantKept: true},
			{name: "update, gate off, old does not use it", gate: false, update: true, wantKept: false},
			{name: "update, gate off, old uses it", gate: false, update: true, oldUses: true, wantKept: true},
		} {
			t.Run(field.name+"/"+tc.name, func(t *testing.T) {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, field.gate, tc.gate)
				slice := testSlice(field.set)
				if tc.update {
					old := testSlice()
					if tc.oldUses {
						old = testSlice(field.set)
					}
					strategy.PrepareForUpdate(ctx, slice, old)
				} else {
					strategy.PrepareForCreate(ctx, slice)
				}
				if got := present(field.get(slice)); got != tc.wantKept {
					t.Errorf("%s kept: %v, want %v (now %v)", field.name, got, tc.wantKept, field.get(slice))
				}
				want := testSlice(field.set)
				if !tc.wantKept {
					dropOnly(want, field.gate)
				}
				if diff := cmp.Diff(want.Spec, slice.Spec); diff != "" {
					t.Errorf("spec changed beyond the gated field (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// dropOnly drops just the field of gate, the expected result of a drop.
func dropOnly(slice *resourceapi.ResourceSlice, gate featuregate.Feature) {
	for _, f := range gatedFields {
		if slices.Contains(f.gates, gate) {
			f.drop(slice)
		}
	}
}

// TestStorageDropsDisabledFields writes through the real store (embedded
// etcd): with the gate off skipNodeOperations is not stored; with it on it
// is stored and read back; an update with the gate off again keeps it
// because the stored slice uses it.
func TestStorageDropsDisabledFields(t *testing.T) {
	storage := newTestREST(t)
	ctx := genericapirequest.WithNamespace(context.Background(), "")
	withSkip := func(name string) *resourceapi.ResourceSlice {
		slice := newSlice(name, "node-1", "one.example.com", "pool-"+name)
		slice.Spec.SkipNodeOperations = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
		return slice
	}
	stored := func(name string) *resourceapi.ResourceSlice {
		obj, err := storage.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*resourceapi.ResourceSlice)
	}

	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAOptionalNodeOperations, false)
	if _, err := storage.Create(ctx, withSkip("off"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := stored("off").Spec.SkipNodeOperations; got != nil {
		t.Errorf("gate off: stored skipNodeOperations %v, want none", got)
	}

	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAOptionalNodeOperations, true)
	if _, err := storage.Create(ctx, withSkip("on"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
	if got := stored("on").Spec.SkipNodeOperations; !cmp.Equal(got, want) {
		t.Errorf("gate on: stored skipNodeOperations %v, want %v", got, want)
	}

	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAOptionalNodeOperations, false)
	for _, name := range []string{"on", "off"} {
		update := withSkip(name)
		update.ResourceVersion = stored(name).ResourceVersion
		update.Labels = map[string]string{"updated": "true"}
		if _, _, err := storage.Update(ctx, name, rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := stored("on").Spec.SkipNodeOperations; !cmp.Equal(got, want) {
		t.Errorf("gate off, update of a slice that uses the field: stored %v, want %v", got, want)
	}
	if got := stored("off").Spec.SkipNodeOperations; got != nil {
		t.Errorf("gate off, update of a slice that does not use the field: stored %v, want none", got)
	}
}
