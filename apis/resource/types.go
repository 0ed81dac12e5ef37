package resource

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceSlice publishes the devices of one driver in one pool. A pool
// may span several slices; all slices of the current generation together
// describe the pool.
type ResourceSlice struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the devices and where they are reachable from.
	Spec ResourceSliceSpec `json:"spec"`
}

// ResourceSliceSpec describes the devices that one driver offers in one pool.
type ResourceSliceSpec struct {
	// Driver is the DNS subdomain name of the driver that owns these devices.
	Driver string `json:"driver"`

	// Pool names the pool this slice belongs to, with its generation and
	// the number of slices that make it up.
	Pool ResourcePool `json:"pool"`

	// NodeName ties every device of the slice to one node.
	// Exactly one of nodeName, nodeSelector, allNodes and
	// perDeviceNodeSelection must be set.
	// +optional
	// +oneOf=NodeSelection
	NodeName *string `json:"nodeName,omitempty"`

	// NodeSelector names the nodes on which the devices are usable. It must
	// have exactly one term.
	// +optional
	// +oneOf=NodeSelection
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`

	// AllNodes marks the devices as usable from every node.
	// +optional
	// +oneOf=NodeSelection
	AllNodes *bool `json:"allNodes,omitempty"`

	// Devices lists the devices of this slice.
	// +optional
	// +listType=atomic
	Devices []Device `json:"devices,omitempty"`

	// PerDeviceNodeSelection, when true, means every device says itself
	// where it is usable (nodeName, nodeSelector or allNodes on the device).
	// +optional
	// +oneOf=NodeSelection
	PerDeviceNodeSelection *bool `json:"perDeviceNodeSelection,omitempty"`

	// SharedCounters declares counter sets that devices of the pool consume
	// from. A slice with shared counters has no devices.
	// +optional
	// +listType=atomic
	SharedCounters []CounterSet `json:"sharedCounters,omitempty"`

	// PartitionTypeAttribute names a string device attribute (fully
	// qualified, e.g. "gpu.example.com/profile") whose value gives each
	// partitionable device of the slice its partition type, such as
	// "Full" or "Half". When set, every device of the slice that consumes
	// counters carries the attribute, and devices with the same value
	// consume the same counters.
	// Alpha: needs the DRAPartitionableDevicesType feature gate.
	// +optional
	// +featureGate=DRAPartitionableDevicesType
	PartitionTypeAttribute *FullyQualifiedName `json:"partitionTypeAttribute,omitempty"`

	// SkipNodeOperations lists the node-local operations (gRPC calls of
	// the kubelet to the driver) that this slice's devices do not need:
	// "NodePrepareResources" (only together with "NodeUnprepareResources"
	// or "*"), "NodeUnprepareResources", or "*" for all of them. A call
	// is skipped for a claim when every device of the driver allocated to
	// the claim skips it. Unknown values are ignored by nodes.
	// Alpha: needs the DRAOptionalNodeOperations feature gate.
	// +optional
	// +listType=set
	// +featureGate=DRAOptionalNodeOperations
	SkipNodeOperations []SkipNodeOperation `json:"skipNodeOperations,omitempty"`
}

// SkipNodeOperation names a node-local operation a device does not need.
// +enum
type SkipNodeOperation string

const (
	// SkipNodeOperationNodePrepareResources skips NodePrepareResources.
	SkipNodeOperationNodePrepareResources SkipNodeOperation = "NodePrepareResources"
	// SkipNodeOperationNodeUnprepareResources skips NodeUnprepareResources.
	SkipNodeOperationNodeUnprepareResources SkipNodeOperation = "NodeUnprepareResources"
	// SkipNodeOperationAll skips every node-local operation.
	SkipNodeOperationAll SkipNodeOperation = "*"
)

// CounterSet is a named set of counters that partitionable devices draw on.
type CounterSet struct {
	// Name identifies the counter set inside the pool (DNS label).
	Name string `json:"name"`

	// Counters maps counter names (DNS labels) to their total amount.
	// +optional
	Counters map[string]Counter `json:"counters,omitempty"`
}

// ResourcePool identifies the pool a slice belongs to.
type ResourcePool struct {
	// Name of the pool, unique per driver. Made of DNS subdomains joined by
	// slashes, at most 253 characters.
	Name string `json:"name"`

	// Generation is bumped by the driver whenever the pool changes. Consumers
	// use only slices of the highest generation they see.
	Generation int64 `json:"generation"`

	// ResourceSliceCount is the number of slices in the pool at this
	// generation. A pool whose newest generation has fewer or more
	// visible slices is incomplete and not allocated from.
	ResourceSliceCount int64 `json:"resourceSliceCount"`
}

// Device is one allocatable device.
type Device struct {
	// Name of the device, a DNS label unique within the pool.
	Name string `json:"name"`

	// Attributes describe the device; CEL selectors match on them.
	// +optional
	Attributes map[QualifiedName]DeviceAttribute `json:"attributes,omitempty"`

	// Capacity lists the amounts the device has of each capacity.
	// +optional
	Capacity map[QualifiedName]DeviceCapacity `json:"capacity,omitempty"`

	// ConsumesCounters lists the counters this device uses up from the
	// pool's shared counter sets when allocated.
	// +optional
	// +listType=atomic
	ConsumesCounters []DeviceCounterConsumption `json:"consumesCounters,omitempty"`

	// NodeName ties this device to one node (needs perDeviceNodeSelection).
	// +optional
	// +oneOf=DeviceNodeSelection
	NodeName *string `json:"nodeName,omitempty"`

	// NodeSelector selects the nodes this device is usable from (needs
	// perDeviceNodeSelection).
	// +optional
	// +oneOf=DeviceNodeSelection
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`

	// AllNodes marks this device usable from every node (needs
	// perDeviceNodeSelection).
	// +optional
	// +oneOf=DeviceNodeSelection
	AllNodes *bool `json:"allNodes,omitempty"`

	// Taints of the device. Pods whose claims do not tolerate them are not
	// scheduled onto it (NoSchedule) or are evicted (NoExecute).
	// +optional
	// +listType=atomic
	Taints []DeviceTaint `json:"taints,omitempty"`

	// BindsToNode asks the scheduler to pin the allocation to the chosen
	// node even when the device is reachable from several.
	// +optional
	BindsToNode *bool `json:"bindsToNode,omitempty"`

	// BindingConditions are condition types that must become true in the
	// claim's device status before a pod using the device is bound.
	// +optional
	// +listType=atomic
	BindingConditions []string `json:"bindingConditions,omitempty"`

	// BindingFailureConditions are condition types that, when true, make
	// the binding fail and the allocation be undone.
	// +optional
	// +listType=atomic
	BindingFailureConditions []string `json:"bindingFailureConditions,omitempty"`

	// AllowMultipleAllocations lets several claims share the device, each
	// consuming part of its capacity.
	// +optional
	AllowMultipleAllocations *bool `json:"allowMultipleAllocations,omitempty"`

	// NodeAllocatableResources maps node-allocatable resource names
	// ("cpu", "memory", "ephemeral-storage", hugepages; not extended
	// resources) to how allocating this device uses them: a CPU driver's
	// device may stand for exclusive CPUs, an accelerator may need host
	// memory besides.
	// Alpha: needs the DRANodeAllocatableResources feature gate.
	// +optional
	// +featureGate=DRANodeAllocatableResources
	NodeAllocatableResources map[corev1.ResourceName]NodeAllocatableResource `json:"nodeAllocatableResources,omitempty"`
}

// NodeAllocatableResource says how much of one node-allocatable resource
// an allocation of the device uses. At least one of mapping and overhead
// is set.
type NodeAllocatableResource struct {
	// Mapping is set when the device itself models the resource (e.g. a
	// CPU driver's cores); the amount counts once per claim on the node,
	// and such a claim is not shared by several pods.
	// +optional
	Mapping *NodeAllocatableMapping `json:"mapping,omitempty"`

	// Overhead is what the device needs of the resource besides (e.g.
	// host memory of a GPU); it counts for every pod that uses the claim,
	// and is subtracted from the node's allocatable even when mapping is
	// set for the same resource.
	// +optional
	Overhead *NodeAllocatableOverhead `json:"overhead,omitempty"`
}

// NodeAllocatableMapping turns an allocation into an amount of the
// resource: either consumedCapacity[capacityKey] * capacityMultiplier or
// the number of allocated devices * deviceMultiplier.
type NodeAllocatableMapping struct {
	// CapacityKey names a capacity of the device; the amount of it the
	// claim consumes, times capacityMultiplier, is the amount of the
	// resource. Set together with capacityMultiplier.
	// +optional
	CapacityKey *QualifiedName `json:"capacityKey,omitempty"`

	// CapacityMultiplier multiplies the consumed capacity of capacityKey.
	// Set together with capacityKey.
	// +optional
	CapacityMultiplier *resource.Quantity `json:"capacityMultiplier,omitempty"`

	// DeviceMultiplier multiplies the number of allocated devices. Not
	// set together with capacityKey and capacityMultiplier.
	// +optional
	DeviceMultiplier *resource.Quantity `json:"deviceMultiplier,omitempty"`
}

// NodeAllocatableOverhead is the extra amount of a resource an allocation
// of the device needs: perPod + perContainer * (containers that use the
// claim), per pod.
type NodeAllocatableOverhead struct {
	// PerPod counts once for each pod that uses the claim.
	// +optional
	PerPod *resource.Quantity `json:"perPod,omitempty"`

	// PerContainer counts for each container that uses the claim.
	// +optional
	PerContainer *resource.Quantity `json:"perContainer,omitempty"`
}

// DeviceCounterConsumption says how much of one counter set a device uses.
type DeviceCounterConsumption struct {
	// CounterSet names the counter set in the pool's sharedCounters.
	CounterSet string `json:"counterSet"`

	// Counters maps counter names to the amount consumed.
	// +optional
	Counters map[string]Counter `json:"counters,omitempty"`

	// CompatibilityGroups are opaque group names (at most 2, unique).
	// Devices that consume from the same counter set may be allocated at
	// the same time only if they share at least one group; a device
	// without groups only goes with siblings without groups.
	// Alpha: needs the DRADeviceCompatibilityGroups feature gate.
	// +optional
	// +listType=atomic
	// +featureGate=DRADeviceCompatibilityGroups
	CompatibilityGroups []string `json:"compatibilityGroups,omitempty"`
}

// DeviceCapacity is the amount of one capacity of a device.
type DeviceCapacity struct {
	// Value is the total amount.
	Value resource.Quantity `json:"value"`

	// RequestPolicy constrains how much of the capacity one allocation may
	// take when the device allows multiple allocations.
	// +optional
	RequestPolicy *CapacityRequestPolicy `json:"requestPolicy,omitempty"`
}

// Counter holds one counter amount.
type Counter struct {
	// Value of the counter.
	Value resource.Quantity `json:"value"`
}

// CapacityRequestPolicy says what a request for a share of a capacity is
// rounded to. At most one of validValues and validRange may be set.
type CapacityRequestPolicy struct {
	// Default is the amount consumed when a request names no amount.
	// +optional
	Default *resource.Quantity `json:"default"`

	// ValidValues lists the amounts that may be consumed, ascending. A
	// request is rounded up to the next valid value.
	// +optional
	// +listType=atomic
	ValidValues []resource.Quantity `json:"validValues,omitempty"`

	// ValidRange bounds the amount and its step.
	// +optional
	ValidRange *CapacityRequestPolicyRange `json:"validRange,omitempty"`
}

// CapacityRequestPolicyRange bounds a consumable capacity request.
type CapacityRequestPolicyRange struct {
	// Min is the smallest amount one allocation consumes.
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`

	// Max is the largest amount one allocation may consume.
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`

	// Step: consumed amounts are min plus a multiple of step.
	// +optional
	Step *resource.Quantity `json:"step,omitempty"`
}

// QualifiedName is an attribute or capacity name, either a C identifier
// (then qualified by the driver name) or "<domain>/<identifier>".
type QualifiedName string

// FullyQualifiedName is "<domain>/<identifier>".
type FullyQualifiedName string

// DeviceAttribute holds exactly one typed value.
type DeviceAttribute struct {
	// IntValue is a number.
	// +optional
	// +oneOf=ValueType
	IntValue *int64 `json:"int,omitempty"`

	// BoolValue is true or false.
	// +optional
	// +oneOf=ValueType
	BoolValue *bool `json:"bool,omitempty"`

	// StringValue is a string of at most 64 characters.
	// +optional
	// +oneOf=ValueType
	StringValue *string `json:"string,omitempty"`

	// VersionValue is a semantic version (semver 2.0.0) of at most 64 characters.
	// +optional
	// +oneOf=ValueType
	VersionValue *string `json:"version,omitempty"`

	// IntValues is a non-empty list of numbers.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	IntValues []int64 `json:"ints,omitempty"`

	// BoolValues is a non-empty list of true/false values.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	BoolValues []bool `json:"bools,omitempty"`

	// StringValues is a non-empty list of strings of at most 64
	// characters each.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	StringValues []string `json:"strings,omitempty"`

	// VersionValues is a non-empty list of semantic versions (semver
	// 2.0.0) of at most 64 characters each.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	VersionValues []string `json:"versions,omitempty"`
}

// DeviceTaintEffect is what a taint does to consumers that don't tolerate it.
// +enum
type DeviceTaintEffect string

const (
	// DeviceTaintEffectNone has no effect on scheduling or running pods;
	// useful to test what a rule would do.
	DeviceTaintEffectNone DeviceTaintEffect = "None"
	// DeviceTaintEffectNoSchedule keeps new allocations off the device.
	DeviceTaintEffectNoSchedule DeviceTaintEffect = "NoSchedule"
	// DeviceTaintEffectNoExecute also evicts pods already using the device.
	DeviceTaintEffectNoExecute DeviceTaintEffect = "NoExecute"
)

// DeviceTaint marks a device; see DeviceTaintEffect.
type DeviceTaint struct {
	// Key of the taint, a label key.
	Key string `json:"key"`

	// Value of the taint, a label value.
	// +optional
	Value string `json:"value,omitempty"`

	// Effect of the taint: None, NoSchedule or NoExecute.
	// +required
	Effect DeviceTaintEffect `json:"effect"`

	// TimeAdded is when the taint was added; set by the server when missing.
	// +optional
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceTaintRule adds a taint to every device its selector matches.
type DeviceTaintRule struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which devices get which taint.
	Spec DeviceTaintRuleSpec `json:"spec"`

	// Status reports what the rule is doing, e.g. evictions in progress.
	// +optional
	Status DeviceTaintRuleStatus `json:"status,omitempty"`
}

// DeviceTaintRuleSpec selects devices and the taint to put on them.
type DeviceTaintRuleSpec struct {
	// DeviceSelector picks the devices. A nil selector matches no device.
	// +optional
	DeviceSelector *DeviceTaintSelector `json:"deviceSelector,omitempty"`

	// Taint applied to every selected device.
	// +required
	Taint DeviceTaint `json:"taint,omitempty"`
}

// DeviceTaintSelector matches devices by driver, pool and name. Every field
// that is set must match.
type DeviceTaintSelector struct {
	// Driver name the device must belong to.
	// +optional
	Driver *string `json:"driver,omitempty"`

	// Pool name the device must belong to.
	// +optional
	Pool *string `json:"pool,omitempty"`

	// Device name to match.
	// +optional
	Device *string `json:"device,omitempty"`
}

// DeviceTaintRuleStatus reports the progress of a rule.
type DeviceTaintRuleStatus struct {
	// Conditions, such as EvictionInProgress.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceTaintRuleList is a list of DeviceTaintRules.
type DeviceTaintRuleList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of rules.
	Items []DeviceTaintRule `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceSliceList is a list of ResourceSlices.
type ResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of slices.
	Items []ResourceSlice `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaim asks for devices. Its status records the allocation and
// the consumers it is reserved for.
type ResourceClaim struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what is wanted. It is immutable.
	Spec ResourceClaimSpec `json:"spec"`

	// Status says what was allocated and who uses it.
	// +optional
	Status ResourceClaimStatus `json:"status,omitempty"`
}

// ResourceClaimSpec is what a claim asks for.
type ResourceClaimSpec struct {
	// Devices says which devices are requested and how.
	// +optional
	Devices DeviceClaim `json:"devices"`
}

// DeviceClaim holds the device requests, constraints and configuration of
// a claim.
type DeviceClaim struct {
	// Requests are the device requests; all must be satisfied.
	// +optional
	// +listType=atomic
	Requests []DeviceRequest `json:"requests"`

	// Constraints must hold across the devices chosen for the named requests.
	// +optional
	// +listType=atomic
	Constraints []DeviceConstraint `json:"constraints,omitempty"`

	// Config is opaque configuration handed to the drivers.
	// +optional
	// +listType=atomic
	Config []DeviceClaimConfiguration `json:"config,omitempty"`
}

// DeviceRequest asks for devices, either one exact way (exactly) or the
// first of several alternatives that fits (firstAvailable). Exactly one of
// the two must be set.
type DeviceRequest struct {
	// Name of the request (DNS label), used by constraints, config and results.
	Name string `json:"name"`

	// Exactly is a request that must be satisfied as written.
	// +optional
	// +oneOf=deviceRequestType
	Exactly *ExactDeviceRequest `json:"exactly,omitempty"`

	// FirstAvailable lists alternatives in order of preference; the first
	// that can be satisfied is used.
	// +optional
	// +oneOf=deviceRequestType
	// +listType=atomic
	FirstAvailable []DeviceSubRequest `json:"firstAvailable,omitempty"`
}

// ExactDeviceRequest asks for devices of one class.
type ExactDeviceRequest struct {
	// DeviceClassName names the DeviceClass the devices must belong to.
	DeviceClassName string `json:"deviceClassName"`

	// Selectors narrow the class's devices; all must match.
	// +optional
	// +listType=atomic
	Selectors []DeviceSelector `json:"selectors,omitempty"`

	// AllocationMode is ExactCount (default: count devices) or All (every
	// matching device).
	// +optional
	AllocationMode DeviceAllocationMode `json:"allocationMode,omitempty"`

	// Count is the number of devices for ExactCount; defaults to 1.
	// +optional
	Count int64 `json:"count,omitempty"`

	// AdminAccess asks for administrative access: the devices may already
	// be in use by other claims.
	// +optional
	AdminAccess *bool `json:"adminAccess,omitempty"`

	// Tolerations of device taints.
	// +optional
	// +listType=atomic
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`

	// Capacity asks for a share of each named capacity of a device that
	// allows multiple allocations.
	// +optional
	Capacity *CapacityRequirements `json:"capacity,omitempty"`

	// DerivedAttributes are virtual attributes computed per candidate
	// device by CEL, for use in the claim's matchAttribute and
	// distinctAttribute constraints (each must be used by one). At most
	// 32.
	// Alpha: needs the DRADerivedAttributes feature gate.
	// +optional
	// +listType=atomic
	// +featureGate=DRADerivedAttributes
	DerivedAttributes []DeviceDerivedAttribute `json:"derivedAttributes,omitempty"`
}

// DeviceSubRequest is one alternative of a firstAvailable request.
type DeviceSubRequest struct {
	// Name of the alternative (DNS label); results name it "<request>/<name>".
	Name string `json:"name"`

	// DeviceClassName names the DeviceClass the devices must belong to.
	DeviceClassName string `json:"deviceClassName"`

	// Selectors narrow the class's devices; all must match.
	// +optional
	// +listType=atomic
	Selectors []DeviceSelector `json:"selectors,omitempty"`

	// AllocationMode is ExactCount (default) or All.
	// +optional
	AllocationMode DeviceAllocationMode `json:"allocationMode,omitempty"`

	// Count is the number of devices for ExactCount; defaults to 1.
	// +optional
	Count int64 `json:"count,omitempty"`

	// Tolerations of device taints.
	// +optional
	// +listType=atomic
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`

	// Capacity asks for a share of each named capacity.
	// +optional
	Capacity *CapacityRequirements `json:"capacity,omitempty"`

	// DerivedAttributes are virtual attributes computed per candidate
	// device by CEL, for use in the claim's matchAttribute and
	// distinctAttribute constraints (each must be used by one). At most
	// 32.
	// Alpha: needs the DRADerivedAttributes feature gate.
	// +optional
	// +listType=atomic
	// +featureGate=DRADerivedAttributes
	DerivedAttributes []DeviceDerivedAttribute `json:"derivedAttributes,omitempty"`
}

// DeviceDerivedAttribute is a virtual attribute of a candidate device,
// computed by a CEL expression.
type DeviceDerivedAttribute struct {
	// Name is a DNS subdomain, a slash and a C identifier (e.g.
	// "derived/numaNode"). A name that is also a device attribute shadows
	// it in the constraints.
	Name FullyQualifiedName `json:"name"`

	// Expression is evaluated with the same "device" variable as a CEL
	// selector, after the request's selectors matched; it yields a string,
	// integer, boolean or semver, or a list of one of these. At most
	// 10 Ki long.
	Expression string `json:"expression"`
}

// CapacityRequirements names the amounts of capacity one request consumes
// from a shared device.
type CapacityRequirements struct {
	// Requests maps capacity names to the minimum amount wanted.
	// +optional
	Requests map[QualifiedName]resource.Quantity `json:"requests,omitempty"`
}

// DeviceAllocationMode says how many devices a request gets.
// +enum
type DeviceAllocationMode string

const (
	// DeviceAllocationModeExactCount allocates exactly count devices.
	DeviceAllocationModeExactCount DeviceAllocationMode = "ExactCount"
	// DeviceAllocationModeAll allocates every matching device.
	DeviceAllocationModeAll DeviceAllocationMode = "All"
)

// DeviceSelector is one way of matching devices.
type DeviceSelector struct {
	// CEL is a CEL expression over the device.
	// +optional
	// +oneOf=SelectorType
	CEL *CELDeviceSelector `json:"cel,omitempty"`
}

// CELDeviceSelector matches devices with a CEL expression that evaluates
// to a bool. The expression sees `device.driver`, `device.attributes` and
// `device.capacity`.
type CELDeviceSelector struct {
	// Expression is the CEL expression; at most 10 KiB, and its estimated
	// cost must stay under the limit.
	Expression string `json:"expression"`
}

// DeviceConstraint must be satisfied by the devices allocated for the
// named requests (all requests when empty).
type DeviceConstraint struct {
	// Requests this constraint applies to; empty means all.
	// +optional
	// +listType=atomic
	Requests []string `json:"requests,omitempty"`

	// MatchAttribute requires every device to have this attribute with the
	// same value.
	// +optional
	// +oneOf=ConstraintType
	MatchAttribute *FullyQualifiedName `json:"matchAttribute,omitempty"`

	// DistinctAttribute requires every device to have this attribute with
	// pairwise different values.
	// +optional
	// +oneOf=ConstraintType
	DistinctAttribute *FullyQualifiedName `json:"distinctAttribute,omitempty"`
}

// DeviceClaimConfiguration is claim-level configuration for some requests.
type DeviceClaimConfiguration struct {
	// Requests this configuration applies to; empty means all.
	// +optional
	// +listType=atomic
	Requests []string `json:"requests,omitempty"`

	DeviceConfiguration `json:""`
}

// DeviceConfiguration holds one kind of configuration.
type DeviceConfiguration struct {
	// Opaque is driver-specific configuration.
	// +optional
	// +oneOf=ConfigurationType
	Opaque *OpaqueDeviceConfiguration `json:"opaque,omitempty"`
}

// OpaqueDeviceConfiguration is configuration only the named driver reads.
type OpaqueDeviceConfiguration struct {
	// Driver that reads this configuration.
	Driver string `json:"driver"`

	// Parameters for the driver; any JSON object, at most 10 KiB.
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters runtime.RawExtension `json:"parameters"`
}

// DeviceToleration tolerates taints that match the key, value and effect
// via the operator.
type DeviceToleration struct {
	// Key the toleration applies to; empty with operator Exists matches all.
	// +optional
	Key string `json:"key,omitempty"`

	// Operator is Equal (default) or Exists.
	// +optional
	// +default="Equal"
	Operator DeviceTolerationOperator `json:"operator,omitempty"`

	// Value to compare with for Equal; must be empty for Exists.
	// +optional
	Value string `json:"value,omitempty"`

	// Effect to match; empty matches all effects.
	// +optional
	Effect DeviceTaintEffect `json:"effect,omitempty"`

	// TolerationSeconds bounds how long a NoExecute taint is tolerated.
	// Nil means forever; zero or less means evict at once.
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// DeviceTolerationOperator is how a toleration compares values.
// +enum
type DeviceTolerationOperator string

const (
	// DeviceTolerationOpExists matches any value.
	DeviceTolerationOpExists DeviceTolerationOperator = "Exists"
	// DeviceTolerationOpEqual matches equal values.
	DeviceTolerationOpEqual DeviceTolerationOperator = "Equal"
)

// ResourceClaimStatus records allocation, reservation and device status.
type ResourceClaimStatus struct {
	// Allocation is set once devices are allocated.
	// +optional
	Allocation *AllocationResult `json:"allocation,omitempty"`

	// ReservedFor lists the consumers allowed to use the allocated devices,
	// at most 256.
	// +optional
	// +listType=map
	// +listMapKey=uid
	// +patchStrategy=merge
	// +patchMergeKey=uid
	ReservedFor []ResourceClaimConsumerReference `json:"reservedFor,omitempty" patchStrategy:"merge" patchMergeKey:"uid"`

	// Devices holds status that drivers report per allocated device.
	// +optional
	// +listType=map
	// +listMapKey=driver
	// +listMapKey=device
	// +listMapKey=pool
	// +listMapKey=shareID
	Devices []AllocatedDeviceStatus `json:"devices,omitempty"`
}

// ResourceClaimConsumerReference names a consumer of a claim.
type ResourceClaimConsumerReference struct {
	// APIGroup of the consumer; empty for core.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Resource type of the consumer, e.g. "pods".
	Resource string `json:"resource"`
	// Name of the consumer.
	Name string `json:"name"`
	// UID identifies one instance of the consumer.
	UID types.UID `json:"uid"`
}

// AllocationResult is what was allocated for a claim.
type AllocationResult struct {
	// Devices lists the allocated devices and their configuration.
	// +optional
	Devices DeviceAllocationResult `json:"devices,omitempty"`

	// NodeSelector names the nodes where the allocated devices can be used.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`

	// AllocationTimestamp is when the allocation was made.
	// +optional
	AllocationTimestamp *metav1.Time `json:"allocationTimestamp,omitempty"`
}

// DeviceAllocationResult holds the per-request results and configuration.
type DeviceAllocationResult struct {
	// Results, one per allocated device, at most 32.
	// +optional
	// +listType=atomic
	Results []DeviceRequestAllocationResult `json:"results,omitempty"`

	// Config from the classes and the claim, in that order.
	// +optional
	// +listType=atomic
	Config []DeviceAllocationConfiguration `json:"config,omitempty"`
}

// DeviceRequestAllocationResult is one allocated device.
type DeviceRequestAllocationResult struct {
	// Request is the request name, or "<request>/<subrequest>".
	Request string `json:"request"`
	// Driver of the device.
	Driver string `json:"driver"`
	// Pool of the device.
	Pool string `json:"pool"`
	// Device name within the pool.
	Device string `json:"device"`

	// AdminAccess is copied from the request.
	// +optional
	AdminAccess *bool `json:"adminAccess,omitempty"`

	// Tolerations the request had when allocated.
	// +optional
	// +listType=atomic
	Tolerations []DeviceToleration `json:"tolerations,omitempty"`

	// BindingConditions copied from the device.
	// +optional
	// +listType=atomic
	BindingConditions []string `json:"bindingConditions,omitempty"`

	// BindingFailureConditions copied from the device.
	// +optional
	// +listType=atomic
	BindingFailureConditions []string `json:"bindingFailureConditions,omitempty"`

	// ShareID distinguishes allocations of one device that allows multiple
	// allocations.
	// +optional
	ShareID *types.UID `json:"shareID,omitempty"`

	// ConsumedCapacity is how much of each capacity this allocation takes.
	// +optional
	ConsumedCapacity map[QualifiedName]resource.Quantity `json:"consumedCapacity,omitempty"`

	// SkipNodeOperations is the device's slice's skipNodeOperations at
	// the time of allocation.
	// Alpha: needs the DRAOptionalNodeOperations feature gate.
	// +optional
	// +listType=set
	// +featureGate=DRAOptionalNodeOperations
	SkipNodeOperations []SkipNodeOperation `json:"skipNodeOperations,omitempty"`
}

// DeviceAllocationConfiguration is configuration in an allocation result.
type DeviceAllocationConfiguration struct {
	// Source is FromClass or FromClaim.
	Source AllocationConfigSource `json:"source"`

	// Requests it applies to; empty means all.
	// +optional
	// +listType=atomic
	Requests []string `json:"requests,omitempty"`

	DeviceConfiguration `json:""`
}

// AllocationConfigSource says where configuration came from.
// +enum
type AllocationConfigSource string

const (
	// AllocationConfigSourceClass is configuration from a DeviceClass.
	AllocationConfigSourceClass AllocationConfigSource = "FromClass"
	// AllocationConfigSourceClaim is configuration from the claim.
	AllocationConfigSourceClaim AllocationConfigSource = "FromClaim"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaimList is a list of ResourceClaims.
type ResourceClaimList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of claims.
	Items []ResourceClaim `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceClass is a set of devices, chosen by selectors, with configuration
// for them. Requests name a class.
type DeviceClass struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the selectors and configuration.
	Spec DeviceClassSpec `json:"spec"`
}

// DeviceClassSpec holds what defines a class.
type DeviceClassSpec struct {
	// Selectors every device of the class must match.
	// +optional
	// +listType=atomic
	Selectors []DeviceSelector `json:"selectors,omitempty"`

	// Config handed to drivers for devices allocated through this class.
	// +optional
	// +listType=atomic
	Config []DeviceClassConfiguration `json:"config,omitempty"`

	// ExtendedResourceName is an extended resource name that pods may
	// request to get a device of this class.
	// +optional
	ExtendedResourceName *string `json:"extendedResourceName,omitempty"`
}

// DeviceClassConfiguration is configuration from a class.
type DeviceClassConfiguration struct {
	DeviceConfiguration `json:""`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceClassList is a list of DeviceClasses.
type DeviceClassList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of classes.
	Items []DeviceClass `json:"items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaimTemplate is used to create a ResourceClaim for each pod
// that names it.
type ResourceClaimTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is copied into each generated claim. It is immutable.
	Spec ResourceClaimTemplateSpec `json:"spec"`
}

// ResourceClaimTemplateSpec holds the metadata and spec of generated claims.
type ResourceClaimTemplateSpec struct {
	// Labels and annotations copied into generated claims. Other metadata
	// fields are rejected.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of the generated claims.
	Spec ResourceClaimSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaimTemplateList is a list of ResourceClaimTemplates.
type ResourceClaimTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of templates.
	Items []ResourceClaimTemplate `json:"items"`
}

// AllocatedDeviceStatus is status a driver reports for one allocated device.
type AllocatedDeviceStatus struct {
	// Driver of the device.
	Driver string `json:"driver"`
	// Pool of the device.
	Pool string `json:"pool"`
	// Device name.
	Device string `json:"device"`

	// ShareID of the allocation, for devices with multiple allocations.
	// +optional
	ShareID *string `json:"shareID,omitempty"`

	// Conditions of the device, e.g. Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions"`

	// Data is driver-specific status; any JSON object, at most 10 KiB.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Data *runtime.RawExtension `json:"data,omitempty"`

	// NetworkData describes the device's network interface.
	// +optional
	NetworkData *NetworkDeviceData `json:"networkData,omitempty"`
}

// NetworkDeviceData describes a network device's interface.
type NetworkDeviceData struct {
	// InterfaceName is the name of the interface in the pod, at most 256 characters.
	// +optional
	InterfaceName string `json:"interfaceName,omitempty"`

	// IPs in CIDR form, at most 16.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty"`

	// HardwareAddress is the MAC address, at most 128 characters.
	// +optional
	HardwareAddress string `json:"hardwareAddress,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourcePoolUsage, served as resourcepools, is a computed, read-only
// view of one resource pool: how many of its devices exist, are allocated,
// tainted or free, how much of its shared counters and consumable capacity
// is used, and how many devices each DeviceClass matches. The server computes it from ResourceSlices,
// ResourceClaims, DeviceClasses and DeviceTaintRules; it is never stored.
// Its name is "<driver>:<pool>" with every "/" of the pool name written
// as ":", unique for each driver and pool.
type ResourcePoolUsage struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is the pool's current usage.
	// +optional
	Status ResourcePoolUsageStatus `json:"status,omitempty"`
}

// ResourcePoolUsageStatus is the usage of one pool, as the allocator sees it.
type ResourcePoolUsageStatus struct {
	// Driver publishing the pool.
	Driver string `json:"driver"`

	// Pool is the pool's name.
	Pool string `json:"pool"`

	// Generation is the pool's newest generation; only its slices count.
	Generation int64 `json:"generation"`

	// Complete is false when fewer or more slices of the newest generation
	// are visible than the pool announces.
	Complete bool `json:"complete"`

	// Problem says why no device of the pool can be allocated (incomplete
	// or invalid pool); empty when they can.
	// +optional
	Problem string `json:"problem,omitempty"`

	// NodeName is the node of the pool's devices, when they are on one.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// AllNodes is set when the devices are reachable from every node.
	// +optional
	AllNodes bool `json:"allNodes,omitempty"`

	// NodeSelector selects the nodes the devices are reachable from.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`

	// PerDeviceNodeSelection is set when each device says where it is.
	// +optional
	PerDeviceNodeSelection bool `json:"perDeviceNodeSelection,omitempty"`

	// Devices counts the pool's devices.
	Devices ResourcePoolDeviceCounts `json:"devices"`

	// SharedCounters lists every counter of the pool's counter sets.
	// +optional
	// +listType=atomic
	SharedCounters []ResourcePoolCounter `json:"sharedCounters,omitempty"`

	// Capacity sums each consumable capacity over the devices that allow
	// multiple allocations.
	// +optional
	// +listType=atomic
	Capacity []ResourcePoolCapacity `json:"capacity,omitempty"`

	// Classes lists the DeviceClasses that match at least one device of
	// the pool.
	// +optional
	// +listType=atomic
	Classes []ResourcePoolClass `json:"classes,omitempty"`
}

// ResourcePoolDeviceCounts counts a pool's devices. A device may be
// counted in several fields.
type ResourcePoolDeviceCounts struct {
	// Total is the number of devices in the newest generation.
	Total int32 `json:"total"`

	// Allocated devices hold at least one allocation without admin access:
	// exclusively, or a share of a device that allows several.
	Allocated int32 `json:"allocated"`

	// AdminAccess is the number of admin-access allocations, which do not
	// make a device busy.
	AdminAccess int32 `json:"adminAccess"`

	// Tainted counts devices with a NoSchedule or NoExecute taint, their
	// own or from a DeviceTaintRule.
	Tainted int32 `json:"tainted"`

	// TaintedNoSchedule counts devices with a NoSchedule taint.
	TaintedNoSchedule int32 `json:"taintedNoSchedule"`

	// TaintedNoExecute counts devices with a NoExecute taint.
	TaintedNoExecute int32 `json:"taintedNoExecute"`

	// Unusable counts the devices of an incomplete or invalid pool.
	Unusable int32 `json:"unusable"`

	// Free devices can take one more allocation of a request without
	// tolerations: not held exclusively, untainted, their shared counters
	// not exhausted and, when shared, some capacity left.
	Free int32 `json:"free"`
}

// ResourcePoolCounter is the use of one shared counter.
type ResourcePoolCounter struct {
	// CounterSet is the name of the counter set.
	CounterSet string `json:"counterSet"`

	// Counter is the counter's name within the set.
	Counter string `json:"counter"`

	// Used is what allocated devices consume of it.
	Used resource.Quantity `json:"used"`

	// Total is what the pool announces.
	Total resource.Quantity `json:"total"`
}

// ResourcePoolCapacity is the use of one consumable capacity, summed over
// the pool's devices that allow multiple allocations.
type ResourcePoolCapacity struct {
	// Name of the capacity.
	Name QualifiedName `json:"name"`

	// Used is what the shares allocated so far consume.
	Used resource.Quantity `json:"used"`

	// Total is the sum of the devices' capacities.
	Total resource.Quantity `json:"total"`
}

// ResourcePoolClass is what one DeviceClass selects of the pool.
type ResourcePoolClass struct {
	// Name of the DeviceClass.
	Name string `json:"name"`

	// Devices is how many devices of the pool the class selects.
	Devices int32 `json:"devices"`

	// Free is how many of those are free.
	Free int32 `json:"free"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourcePoolUsageList is a list of ResourcePoolUsages.
type ResourcePoolUsageList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of pools.
	Items []ResourcePoolUsage `json:"items"`
}
