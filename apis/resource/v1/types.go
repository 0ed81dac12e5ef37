package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceSlice publishes the devices of one driver in one pool. A pool
// may span several slices; all slices of the current generation together
// describe the pool.
type ResourceSlice struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec holds the devices and where they are reachable from.
	Spec ResourceSliceSpec `json:"spec" protobuf:"bytes,2,name=spec"`
}

// ResourceSliceSpec describes the devices that one driver offers in one pool.
type ResourceSliceSpec struct {
	// Driver is the DNS subdomain name of the driver that owns these devices.
	Driver string `json:"driver" protobuf:"bytes,1,name=driver"`

	// Pool names the pool this slice belongs to, with its generation and
	// the number of slices that make it up.
	Pool ResourcePool `json:"pool" protobuf:"bytes,2,name=pool"`

	// NodeName ties every device of the slice to one node.
	// Exactly one of nodeName, nodeSelector, allNodes and
	// perDeviceNodeSelection must be set.
	// +optional
	// +oneOf=NodeSelection
	NodeName *string `json:"nodeName,omitempty" protobuf:"bytes,3,opt,name=nodeName"`

	// NodeSelector names the nodes on which the devices are usable. It must
	// have exactly one term.
	// +optional
	// +oneOf=NodeSelection
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty" protobuf:"bytes,4,opt,name=nodeSelector"`

	// AllNodes marks the devices as usable from every node.
	// +optional
	// +oneOf=NodeSelection
	AllNodes *bool `json:"allNodes,omitempty" protobuf:"bytes,5,opt,name=allNodes"`

	// Devices lists the devices of this slice.
	// +optional
	// +listType=atomic
	Devices []Device `json:"devices,omitempty" protobuf:"bytes,6,name=devices"`

	// PerDeviceNodeSelection, when true, means every device says itself
	// where it is usable (nodeName, nodeSelector or allNodes on the device).
	// +optional
	// +oneOf=NodeSelection
	PerDeviceNodeSelection *bool `json:"perDeviceNodeSelection,omitempty" protobuf:"bytes,7,name=perDeviceNodeSelection"`

	// SharedCounters declares counter sets that devices of the pool consume
	// from. A slice with shared counters has no devices.
	// +optional
	// +listType=atomic
	SharedCounters []CounterSet `json:"sharedCounters,omitempty" protobuf:"bytes,8,name=sharedCounters"`

	// PartitionTypeAttribute names a string device attribute (fully
	// qualified, e.g. "gpu.example.com/profile") whose value gives each
	// partitionable device of the slice its partition type, such as
	// "Full" or "Half". When set, every device of the slice that consumes
	// counters carries the attribute, and devices with the same value
	// consume the same counters.
	// Alpha: needs the DRAPartitionableDevicesType feature gate.
	// +optional
	// +featureGate=DRAPartitionableDevicesType
	PartitionTypeAttribute *FullyQualifiedName `json:"partitionTypeAttribute,omitempty" protobuf:"bytes,9,opt,name=partitionTypeAttribute"`

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
	SkipNodeOperations []SkipNodeOperation `json:"skipNodeOperations,omitempty" protobuf:"bytes,10,rep,name=skipNodeOperations,casttype=SkipNodeOperation"`
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
	Name string `json:"name" protobuf:"bytes,1,name=name"`

	// Counters maps counter names (DNS labels) to their total amount.
	// +optional
	Counters map[string]Counter `json:"counters,omitempty" protobuf:"bytes,2,name=counters"`
}

// ResourcePool identifies the pool a slice belongs to.
type ResourcePool struct {
	// Name of the pool, unique per driver. Made of DNS subdomains joined by
	// slashes, at most 253 characters.
	Name string `json:"name" protobuf:"bytes,1,name=name"`

	// Generation is bumped by the driver whenever the pool changes. Consumers
	// use only slices of the highest generation they see.
	Generation int64 `json:"generation" protobuf:"bytes,2,name=generation"`

	// ResourceSliceCount is the number of slices in the pool at this
	// generation. A pool whose newest generation has fewer or more
	// visible slices is incomplete and not allocated from.
	ResourceSliceCount int64 `json:"resourceSliceCount" protobuf:"bytes,3,name=resourceSliceCount"`
}

// Device is one allocatable device.
type Device struct {
	// Name of the device, a DNS label unique within the pool.
	Name string `json:"name" protobuf:"bytes,1,name=name"`

	// Attributes describe the device; CEL selectors match on them.
	// +optional
	Attributes map[QualifiedName]DeviceAttribute `json:"attributes,omitempty" protobuf:"bytes,2,rep,name=attributes"`

	// Capacity lists the amounts the device has of each capacity.
	// +optional
	Capacity map[QualifiedName]DeviceCapacity `json:"capacity,omitempty" protobuf:"bytes,3,rep,name=capacity"`

	// ConsumesCounters lists the counters this device uses up from the
	// pool's shared counter sets when allocated.
	// +optional
	// +listType=atomic
	ConsumesCounters []DeviceCounterConsumption `json:"consumesCounters,omitempty" protobuf:"bytes,4,rep,name=consumesCounters"`

	// NodeName ties this device to one node (needs perDeviceNodeSelection).
	// +optional
	// +oneOf=DeviceNodeSelection
	NodeName *string `json:"nodeName,omitempty" protobuf:"bytes,5,opt,name=nodeName"`

	// NodeSelector selects the nodes this device is usable from (needs
	// perDeviceNodeSelection).
	// +optional
	// +oneOf=DeviceNodeSelection
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty" protobuf:"bytes,6,opt,name=nodeSelector"`

	// AllNodes marks this device usable from every node (needs
	// perDeviceNodeSelection).
	// +optional
	// +oneOf=DeviceNodeSelection
	AllNodes *bool `json:"allNodes,omitempty" protobuf:"bytes,7,opt,name=allNodes"`

	// Taints of the device. Pods whose claims do not tolerate them are not
	// scheduled onto it (NoSchedule) or are evicted (NoExecute).
	// +optional
	// +listType=atomic
	Taints []DeviceTaint `json:"taints,omitempty" protobuf:"bytes,8,rep,name=taints"`

	// BindsToNode asks the scheduler to pin the allocation to the chosen
	// node even when the device is reachable from several.
	// +optional
	BindsToNode *bool `json:"bindsToNode,omitempty" protobuf:"varint,9,opt,name=bindsToNode"`

	// BindingConditions are condition types that must become true in the
	// claim's device status before a pod using the device is bound.
	// +optional
	// +listType=atomic
	BindingConditions []string `json:"bindingConditions,omitempty" protobuf:"bytes,10,rep,name=bindingConditions"`

	// BindingFailureConditions are condition types that, when true, make
	// the binding fail and the allocation be undone.
	// +optional
	// +listType=atomic
	BindingFailureConditions []string `json:"bindingFailureConditions,omitempty" protobuf:"bytes,11,rep,name=bindingFailureConditions"`

	// AllowMultipleAllocations lets several claims share the device, each
	// consuming part of its capacity.
	// +optional
	AllowMultipleAllocations *bool `json:"allowMultipleAllocations,omitempty" protobuf:"bytes,12,opt,name=allowMultipleAllocations"`

	// NodeAllocatableResources maps node-allocatable resource names
	// ("cpu", "memory", "ephemeral-storage", hugepages; not extended
	// resources) to how allocating this device uses them: a CPU driver's
	// device may stand for exclusive CPUs, an accelerator may need host
	// memory besides.
	// Alpha: needs the DRANodeAllocatableResources feature gate.
	// +optional
	// +featureGate=DRANodeAllocatableResources
	NodeAllocatableResources map[corev1.ResourceName]NodeAllocatableResource `json:"nodeAllocatableResources,omitempty" protobuf:"bytes,14,opt,name=nodeAllocatableResources"`
}

// NodeAllocatableResource says how much of one node-allocatable resource
// an allocation of the device uses. At least one of mapping and overhead
// is set.
type NodeAllocatableResource struct {
	// Mapping is set when the device itself models the resource (e.g. a
	// CPU driver's cores); the amount counts once per claim on the node,
	// and such a claim is not shared by several pods.
	// +optional
	Mapping *NodeAllocatableMapping `json:"mapping,omitempty" protobuf:"bytes,3,opt,name=mapping"`

	// Overhead is what the device needs of the resource besides (e.g.
	// host memory of a GPU); it counts for every pod that uses the claim,
	// and is subtracted from the node's allocatable even when mapping is
	// set for the same resource.
	// +optional
	Overhead *NodeAllocatableOverhead `json:"overhead,omitempty" protobuf:"bytes,4,opt,name=overhead"`
}

// NodeAllocatableMapping turns an allocation into an amount of the
// resource: either consumedCapacity[capacityKey] * capacityMultiplier or
// the number of allocated devices * deviceMultiplier.
type NodeAllocatableMapping struct {
	// CapacityKey names a capacity of the device; the amount of it the
	// claim consumes, times capacityMultiplier, is the amount of the
	// resource. Set together with capacityMultiplier.
	// +optional
	CapacityKey *QualifiedName `json:"capacityKey,omitempty" protobuf:"bytes,1,opt,name=capacityKey"`

	// CapacityMultiplier multiplies the consumed capacity of capacityKey.
	// Set together with capacityKey.
	// +optional
	CapacityMultiplier *resource.Quantity `json:"capacityMultiplier,omitempty" protobuf:"bytes,2,opt,name=capacityMultiplier"`

	// DeviceMultiplier multiplies the number of allocated devices. Not
	// set together with capacityKey and capacityMultiplier.
	// +optional
	DeviceMultiplier *resource.Quantity `json:"deviceMultiplier,omitempty" protobuf:"bytes,3,opt,name=deviceMultiplier"`
}

// NodeAllocatableOverhead is the extra amount of a resource an allocation
// of the device needs: perPod + perContainer * (containers that use the
// claim), per pod.
type NodeAllocatableOverhead struct {
	// PerPod counts once for each pod that uses the claim.
	// +optional
	PerPod *resource.Quantity `json:"perPod,omitempty" protobuf:"bytes,1,opt,name=perPod"`

	// PerContainer counts for each container that uses the claim.
	// +optional
	PerContainer *resource.Quantity `json:"perContainer,omitempty" protobuf:"bytes,2,opt,name=perContainer"`
}

// DeviceCounterConsumption says how much of one counter set a device uses.
type DeviceCounterConsumption struct {
	// CounterSet names the counter set in the pool's sharedCounters.
	CounterSet string `json:"counterSet" protobuf:"bytes,1,opt,name=counterSet"`

	// Counters maps counter names to the amount consumed.
	// +optional
	Counters map[string]Counter `json:"counters,omitempty" protobuf:"bytes,2,opt,name=counters"`

	// CompatibilityGroups are opaque group names (at most 2, unique).
	// Devices that consume from the same counter set may be allocated at
	// the same time only if they share at least one group; a device
	// without groups only goes with siblings without groups.
	// Alpha: needs the DRADeviceCompatibilityGroups feature gate.
	// +optional
	// +listType=atomic
	// +featureGate=DRADeviceCompatibilityGroups
	CompatibilityGroups []string `json:"compatibilityGroups,omitempty" protobuf:"bytes,3,rep,name=compatibilityGroups"`
}

// DeviceCapacity is the amount of one capacity of a device.
type DeviceCapacity struct {
	// Value is the total amount.
	Value resource.Quantity `json:"value" protobuf:"bytes,1,rep,name=value"`

	// RequestPolicy constrains how much of the capacity one allocation may
	// take when the device allows multiple allocations.
	// +optional
	RequestPolicy *CapacityRequestPolicy `json:"requestPolicy,omitempty" protobuf:"bytes,2,opt,name=requestPolicy"`
}

// Counter holds one counter amount.
type Counter struct {
	// Value of the counter.
	Value resource.Quantity `json:"value" protobuf:"bytes,1,rep,name=value"`
}

// CapacityRequestPolicy says what a request for a share of a capacity is
// rounded to. At most one of validValues and validRange may be set.
type CapacityRequestPolicy struct {
	// Default is the amount consumed when a request names no amount.
	// +optional
	Default *resource.Quantity `json:"default" protobuf:"bytes,1,opt,name=default"`

	// ValidValues lists the amounts that may be consumed, ascending. A
	// request is rounded up to the next valid value.
	// +optional
	// +listType=atomic
	ValidValues []resource.Quantity `json:"validValues,omitempty" protobuf:"bytes,3,opt,name=validValues"`

	// ValidRange bounds the amount and its step.
	// +optional
	ValidRange *CapacityRequestPolicyRange `json:"validRange,omitempty" protobuf:"bytes,4,opt,name=validRange"`
}

// CapacityRequestPolicyRange bounds a consumable capacity request.
type CapacityRequestPolicyRange struct {
	// Min is the smallest amount one allocation consumes.
	// +optional
	Min *resource.Quantity `json:"min,omitempty" protobuf:"bytes,1,opt,name=min"`

	// Max is the largest amount one allocation may consume.
	// +optional
	Max *resource.Quantity `json:"max,omitempty" protobuf:"bytes,2,opt,name=max"`

	// Step: consumed amounts are min plus a multiple of step.
	// +optional
	Step *resource.Quantity `json:"step,omitempty" protobuf:"bytes,3,opt,name=step"`
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
	IntValue *int64 `json:"int,omitempty" protobuf:"varint,2,opt,name=int"`

	// BoolValue is true or false.
	// +optional
	// +oneOf=ValueType
	BoolValue *bool `json:"bool,omitempty" protobuf:"varint,3,opt,name=bool"`

	// StringValue is a string of at most 64 characters.
	// +optional
	// +oneOf=ValueType
	StringValue *string `json:"string,omitempty" protobuf:"bytes,4,opt,name=string"`

	// VersionValue is a semantic version (semver 2.0.0) of at most 64 characters.
	// +optional
	// +oneOf=ValueType
	VersionValue *string `json:"version,omitempty" protobuf:"bytes,5,opt,name=version"`

	// IntValues is a non-empty list of numbers.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	IntValues []int64 `json:"ints,omitempty" protobuf:"varint,6,opt,name=ints"`

	// BoolValues is a non-empty list of true/false values.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	BoolValues []bool `json:"bools,omitempty" protobuf:"varint,7,opt,name=bools"`

	// StringValues is a non-empty list of strings of at most 64
	// characters each.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	StringValues []string `json:"strings,omitempty" protobuf:"bytes,8,opt,name=strings"`

	// VersionValues is a non-empty list of semantic versions (semver
	// 2.0.0) of at most 64 characters each.
	// Alpha: needs the DRAListTypeAttributes feature gate.
	// +optional
	// +listType=atomic
	// +oneOf=ValueType
	// +featureGate=DRAListTypeAttributes
	VersionValues []string `json:"versions,omitempty" protobuf:"bytes,9,opt,name=versions"`
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
	Key string `json:"key" protobuf:"bytes,1,name=key"`

	// Value of the taint, a label value.
	// +optional
	Value string `json:"value,omitempty" protobuf:"bytes,2,opt,name=value"`

	// Effect of the taint: None, NoSchedule or NoExecute.
	// +required
	Effect DeviceTaintEffect `json:"effect" protobuf:"bytes,3,name=effect,casttype=DeviceTaintEffect"`

	// TimeAdded is when the taint was added; set by the server when missing.
	// +optional
	TimeAdded *metav1.Time `json:"timeAdded,omitempty" protobuf:"bytes,4,opt,name=timeAdded"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceTaintRule adds a taint to every device its selector matches.
type DeviceTaintRule struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec says which devices get which taint.
	Spec DeviceTaintRuleSpec `json:"spec" protobuf:"bytes,2,name=spec"`

	// Status reports what the rule is doing, e.g. evictions in progress.
	// +optional
	Status DeviceTaintRuleStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// DeviceTaintRuleSpec selects devices and the taint to put on them.
type DeviceTaintRuleSpec struct {
	// DeviceSelector picks the devices. A nil selector matches no device.
	// +optional
	DeviceSelector *DeviceTaintSelector `json:"deviceSelector,omitempty" protobuf:"bytes,1,opt,name=deviceSelector"`

	// Taint applied to every selected device.
	// +required
	Taint DeviceTaint `json:"taint,omitempty" protobuf:"bytes,2,rep,name=taint"`
}

// DeviceTaintSelector matches devices by driver, pool and name. Every field
// that is set must match.
type DeviceTaintSelector struct {
	// Driver name the device must belong to.
	// +optional
	Driver *string `json:"driver,omitempty" protobuf:"bytes,2,opt,name=driver"`

	// Pool name the device must belong to.
	// +optional
	Pool *string `json:"pool,omitempty" protobuf:"bytes,3,opt,name=pool"`

	// Device name to match.
	// +optional
	Device *string `json:"device,omitempty" protobuf:"bytes,4,opt,name=device"`
}

// DeviceTaintRuleStatus reports the progress of a rule.
type DeviceTaintRuleStatus struct {
	// Conditions, such as EvictionInProgress.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type" protobuf:"bytes,1,rep,name=conditions"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceTaintRuleList is a list of DeviceTaintRules.
type DeviceTaintRuleList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of rules.
	Items []DeviceTaintRule `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceSliceList is a list of ResourceSlices.
type ResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of slices.
	Items []ResourceSlice `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaim asks for devices. Its status records the allocation and
// the consumers it is reserved for.
type ResourceClaim struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec says what is wanted. It is immutable.
	Spec ResourceClaimSpec `json:"spec" protobuf:"bytes,2,name=spec"`

	// Status says what was allocated and who uses it.
	// +optional
	Status ResourceClaimStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ResourceClaimSpec is what a claim asks for.
type ResourceClaimSpec struct {
	// Devices says which devices are requested and how.
	// +optional
	Devices DeviceClaim `json:"devices" protobuf:"bytes,1,name=devices"`
}

// DeviceClaim holds the device requests, constraints and configuration of
// a claim.
type DeviceClaim struct {
	// Requests are the device requests; all must be satisfied.
	// +optional
	// +listType=atomic
	Requests []DeviceRequest `json:"requests" protobuf:"bytes,1,name=requests"`

	// Constraints must hold across the devices chosen for the named requests.
	// +optional
	// +listType=atomic
	Constraints []DeviceConstraint `json:"constraints,omitempty" protobuf:"bytes,2,opt,name=constraints"`

	// Config is opaque configuration handed to the drivers.
	// +optional
	// +listType=atomic
	Config []DeviceClaimConfiguration `json:"config,omitempty" protobuf:"bytes,3,opt,name=config"`
}

// DeviceRequest asks for devices, either one exact way (exactly) or the
// first of several alternatives that fits (firstAvailable). Exactly one of
// the two must be set.
type DeviceRequest struct {
	// Name of the request (DNS label), used by constraints, config and results.
	Name string `json:"name" protobuf:"bytes,1,name=name"`

	// Exactly is a request that must be satisfied as written.
	// +optional
	// +oneOf=deviceRequestType
	Exactly *ExactDeviceRequest `json:"exactly,omitempty" protobuf:"bytes,2,name=exactly"`

	// FirstAvailable lists alternatives in order of preference; the first
	// that can be satisfied is used.
	// +optional
	// +oneOf=deviceRequestType
	// +listType=atomic
	FirstAvailable []DeviceSubRequest `json:"firstAvailable,omitempty" protobuf:"bytes,3,name=firstAvailable"`
}

// ExactDeviceRequest asks for devices of one class.
type ExactDeviceRequest struct {
	// DeviceClassName names the DeviceClass the devices must belong to.
	DeviceClassName string `json:"deviceClassName" protobuf:"bytes,1,name=deviceClassName"`

	// Selectors narrow the class's devices; all must match.
	// +optional
	// +listType=atomic
	Selectors []DeviceSelector `json:"selectors,omitempty" protobuf:"bytes,2,name=selectors"`

	// AllocationMode is ExactCount (default: count devices) or All (every
	// matching device).
	// +optional
	AllocationMode DeviceAllocationMode `json:"allocationMode,omitempty" protobuf:"bytes,3,opt,name=allocationMode"`

	// Count is the number of devices for ExactCount; defaults to 1.
	// +optional
	Count int64 `json:"count,omitempty" protobuf:"bytes,4,opt,name=count"`

	// AdminAccess asks for administrative access: the devices may already
	// be in use by other claims.
	// +optional
	AdminAccess *bool `json:"adminAccess,omitempty" protobuf:"bytes,5,opt,name=adminAccess"`

	// Tolerations of device taints.
	// +optional
	// +listType=atomic
	Tolerations []DeviceToleration `json:"tolerations,omitempty" protobuf:"bytes,6,opt,name=tolerations"`

	// Capacity asks for a share of each named capacity of a device that
	// allows multiple allocations.
	// +optional
	Capacity *CapacityRequirements `json:"capacity,omitempty" protobuf:"bytes,7,opt,name=capacity"`

	// DerivedAttributes are virtual attributes computed per candidate
	// device by CEL, for use in the claim's matchAttribute and
	// distinctAttribute constraints (each must be used by one). At most
	// 32.
	// Alpha: needs the DRADerivedAttributes feature gate.
	// +optional
	// +listType=atomic
	// +featureGate=DRADerivedAttributes
	DerivedAttributes []DeviceDerivedAttribute `json:"derivedAttributes,omitempty" protobuf:"bytes,8,rep,name=derivedAttributes"`
}

// DeviceSubRequest is one alternative of a firstAvailable request.
type DeviceSubRequest struct {
	// Name of the alternative (DNS label); results name it "<request>/<name>".
	Name string `json:"name" protobuf:"bytes,1,name=name"`

	// DeviceClassName names the DeviceClass the devices must belong to.
	DeviceClassName string `json:"deviceClassName" protobuf:"bytes,2,name=deviceClassName"`

	// Selectors narrow the class's devices; all must match.
	// +optional
	// +listType=atomic
	Selectors []DeviceSelector `json:"selectors,omitempty" protobuf:"bytes,3,name=selectors"`

	// AllocationMode is ExactCount (default) or All.
	// +optional
	AllocationMode DeviceAllocationMode `json:"allocationMode,omitempty" protobuf:"bytes,4,opt,name=allocationMode"`

	// Count is the number of devices for ExactCount; defaults to 1.
	// +optional
	Count int64 `json:"count,omitempty" protobuf:"bytes,5,opt,name=count"`

	// Tolerations of device taints.
	// +optional
	// +listType=atomic
	Tolerations []DeviceToleration `json:"tolerations,omitempty" protobuf:"bytes,6,opt,name=tolerations"`

	// Capacity asks for a share of each named capacity.
	// +optional
	Capacity *CapacityRequirements `json:"capacity,omitempty" protobuf:"bytes,7,opt,name=capacity"`

	// DerivedAttributes are virtual attributes computed per candidate
	// device by CEL, for use in the claim's matchAttribute and
	// distinctAttribute constraints (each must be used by one). At most
	// 32.
	// Alpha: needs the DRADerivedAttributes feature gate.
	// +optional
	// +listType=atomic
	// +featureGate=DRADerivedAttributes
	DerivedAttributes []DeviceDerivedAttribute `json:"derivedAttributes,omitempty" protobuf:"bytes,8,rep,name=derivedAttributes"`
}

// DeviceDerivedAttribute is a virtual attribute of a candidate device,
// computed by a CEL expression.
type DeviceDerivedAttribute struct {
	// Name is a DNS subdomain, a slash and a C identifier (e.g.
	// "derived/numaNode"). A name that is also a device attribute shadows
	// it in the constraints.
	Name FullyQualifiedName `json:"name" protobuf:"bytes,1,name=name"`

	// Expression is evaluated with the same "device" variable as a CEL
	// selector, after the request's selectors matched; it yields a string,
	// integer, boolean or semver, or a list of one of these. At most
	// 10 Ki long.
	Expression string `json:"expression" protobuf:"bytes,2,name=expression"`
}

// CapacityRequirements names the amounts of capacity one request consumes
// from a shared device.
type CapacityRequirements struct {
	// Requests maps capacity names to the minimum amount wanted.
	// +optional
	Requests map[QualifiedName]resource.Quantity `json:"requests,omitempty" protobuf:"bytes,1,rep,name=requests,castkey=QualifiedName"`
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
	CEL *CELDeviceSelector `json:"cel,omitempty" protobuf:"bytes,1,opt,name=cel"`
}

// CELDeviceSelector matches devices with a CEL expression that evaluates
// to a bool. The expression sees `device.driver`, `device.attributes` and
// `device.capacity`.
type CELDeviceSelector struct {
	// Expression is the CEL expression; at most 10 KiB, and its estimated
	// cost must stay under the limit.
	Expression string `json:"expression" protobuf:"bytes,1,name=expression"`
}

// DeviceConstraint must be satisfied by the devices allocated for the
// named requests (all requests when empty).
type DeviceConstraint struct {
	// Requests this constraint applies to; empty means all.
	// +optional
	// +listType=atomic
	Requests []string `json:"requests,omitempty" protobuf:"bytes,1,opt,name=requests"`

	// MatchAttribute requires every device to have this attribute with the
	// same value.
	// +optional
	// +oneOf=ConstraintType
	MatchAttribute *FullyQualifiedName `json:"matchAttribute,omitempty" protobuf:"bytes,2,opt,name=matchAttribute"`

	// DistinctAttribute requires every device to have this attribute with
	// pairwise different values.
	// +optional
	// +oneOf=ConstraintType
	DistinctAttribute *FullyQualifiedName `json:"distinctAttribute,omitempty" protobuf:"bytes,3,opt,name=distinctAttribute"`
}

// DeviceClaimConfiguration is claim-level configuration for some requests.
type DeviceClaimConfiguration struct {
	// Requests this configuration applies to; empty means all.
	// +optional
	// +listType=atomic
	Requests []string `json:"requests,omitempty" protobuf:"bytes,1,opt,name=requests"`

	DeviceConfiguration `json:"" protobuf:"bytes,2,name=deviceConfiguration"`
}

// DeviceConfiguration holds one kind of configuration.
type DeviceConfiguration struct {
	// Opaque is driver-specific configuration.
	// +optional
	// +oneOf=ConfigurationType
	Opaque *OpaqueDeviceConfiguration `json:"opaque,omitempty" protobuf:"bytes,1,opt,name=opaque"`
}

// OpaqueDeviceConfiguration is configuration only the named driver reads.
type OpaqueDeviceConfiguration struct {
	// Driver that reads this configuration.
	Driver string `json:"driver" protobuf:"bytes,1,name=driver"`

	// Parameters for the driver; any JSON object, at most 10 KiB.
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters runtime.RawExtension `json:"parameters" protobuf:"bytes,2,name=parameters"`
}

// DeviceToleration tolerates taints that match the key, value and effect
// via the operator.
type DeviceToleration struct {
	// Key the toleration applies to; empty with operator Exists matches all.
	// +optional
	Key string `json:"key,omitempty" protobuf:"bytes,1,opt,name=key"`

	// Operator is Equal (default) or Exists.
	// +optional
	// +default="Equal"
	Operator DeviceTolerationOperator `json:"operator,omitempty" protobuf:"bytes,2,opt,name=operator,casttype=DeviceTolerationOperator"`

	// Value to compare with for Equal; must be empty for Exists.
	// +optional
	Value string `json:"value,omitempty" protobuf:"bytes,3,opt,name=value"`

	// Effect to match; empty matches all effects.
	// +optional
	Effect DeviceTaintEffect `json:"effect,omitempty" protobuf:"bytes,4,opt,name=effect,casttype=DeviceTaintEffect"`

	// TolerationSeconds bounds how long a NoExecute taint is tolerated.
	// Nil means forever; zero or less means evict at once.
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty" protobuf:"varint,5,opt,name=tolerationSeconds"`
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
	Allocation *AllocationResult `json:"allocation,omitempty" protobuf:"bytes,1,opt,name=allocation"`

	// ReservedFor lists the consumers allowed to use the allocated devices,
	// at most 256.
	// +optional
	// +listType=map
	// +listMapKey=uid
	// +patchStrategy=merge
	// +patchMergeKey=uid
	ReservedFor []ResourceClaimConsumerReference `json:"reservedFor,omitempty" patchStrategy:"merge" patchMergeKey:"uid" protobuf:"bytes,2,opt,name=reservedFor"`

	// Devices holds status that drivers report per allocated device.
	// +optional
	// +listType=map
	// +listMapKey=driver
	// +listMapKey=device
	// +listMapKey=pool
	// +listMapKey=shareID
	Devices []AllocatedDeviceStatus `json:"devices,omitempty" protobuf:"bytes,4,opt,name=devices"`
}

// ResourceClaimConsumerReference names a consumer of a claim.
type ResourceClaimConsumerReference struct {
	// APIGroup of the consumer; empty for core.
	// +optional
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`
	// Resource type of the consumer, e.g. "pods".
	Resource string `json:"resource" protobuf:"bytes,3,name=resource"`
	// Name of the consumer.
	Name string `json:"name" protobuf:"bytes,4,name=name"`
	// UID identifies one instance of the consumer.
	UID types.UID `json:"uid" protobuf:"bytes,5,name=uid"`
}

// AllocationResult is what was allocated for a claim.
type AllocationResult struct {
	// Devices lists the allocated devices and their configuration.
	// +optional
	Devices DeviceAllocationResult `json:"devices,omitempty" protobuf:"bytes,1,opt,name=devices"`

	// NodeSelector names the nodes where the allocated devices can be used.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty" protobuf:"bytes,3,opt,name=nodeSelector"`

	// AllocationTimestamp is when the allocation was made.
	// +optional
	AllocationTimestamp *metav1.Time `json:"allocationTimestamp,omitempty" protobuf:"bytes,5,opt,name=allocationTimestamp"`
}

// DeviceAllocationResult holds the per-request results and configuration.
type DeviceAllocationResult struct {
	// Results, one per allocated device, at most 32.
	// +optional
	// +listType=atomic
	Results []DeviceRequestAllocationResult `json:"results,omitempty" protobuf:"bytes,1,opt,name=results"`

	// Config from the classes and the claim, in that order.
	// +optional
	// +listType=atomic
	Config []DeviceAllocationConfiguration `json:"config,omitempty" protobuf:"bytes,2,opt,name=config"`
}

// DeviceRequestAllocationResult is one allocated device.
type DeviceRequestAllocationResult struct {
	// Request is the request name, or "<request>/<subrequest>".
	Request string `json:"request" protobuf:"bytes,1,name=request"`
	// Driver of the device.
	Driver string `json:"driver" protobuf:"bytes,2,name=driver"`
	// Pool of the device.
	Pool string `json:"pool" protobuf:"bytes,3,name=pool"`
	// Device name within the pool.
	Device string `json:"device" protobuf:"bytes,4,name=device"`

	// AdminAccess is copied from the request.
	// +optional
	AdminAccess *bool `json:"adminAccess,omitempty" protobuf:"bytes,5,opt,name=adminAccess"`

	// Tolerations the request had when allocated.
	// +optional
	// +listType=atomic
	Tolerations []DeviceToleration `json:"tolerations,omitempty" protobuf:"bytes,6,opt,name=tolerations"`

	// BindingConditions copied from the device.
	// +optional
	// +listType=atomic
	BindingConditions []string `json:"bindingConditions,omitempty" protobuf:"bytes,7,rep,name=bindingConditions"`

	// BindingFailureConditions copied from the device.
	// +optional
	// +listType=atomic
	BindingFailureConditions []string `json:"bindingFailureConditions,omitempty" protobuf:"bytes,8,rep,name=bindingFailureConditions"`

	// ShareID distinguishes allocations of one device that allows multiple
	// allocations.
	// +optional
	ShareID *types.UID `json:"shareID,omitempty" protobuf:"bytes,9,opt,name=shareID"`

	// ConsumedCapacity is how much of each capacity this allocation takes.
	// +optional
	ConsumedCapacity map[QualifiedName]resource.Quantity `json:"consumedCapacity,omitempty" protobuf:"bytes,10,rep,name=consumedCapacity"`

	// SkipNodeOperations is the device's slice's skipNodeOperations at
	// the time of allocation.
	// Alpha: needs the DRAOptionalNodeOperations feature gate.
	// +optional
	// +listType=set
	// +featureGate=DRAOptionalNodeOperations
	SkipNodeOperations []SkipNodeOperation `json:"skipNodeOperations,omitempty" protobuf:"bytes,11,rep,name=skipNodeOperations,casttype=SkipNodeOperation"`
}

// DeviceAllocationConfiguration is configuration in an allocation result.
type DeviceAllocationConfiguration struct {
	// Source is FromClass or FromClaim.
	Source AllocationConfigSource `json:"source" protobuf:"bytes,1,name=source"`

	// Requests it applies to; empty means all.
	// +optional
	// +listType=atomic
	Requests []string `json:"requests,omitempty" protobuf:"bytes,2,opt,name=requests"`

	DeviceConfiguration `json:"" protobuf:"bytes,3,name=deviceConfiguration"`
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
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of claims.
	Items []ResourceClaim `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceClass is a set of devices, chosen by selectors, with configuration
// for them. Requests name a class.
type DeviceClass struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec holds the selectors and configuration.
	Spec DeviceClassSpec `json:"spec" protobuf:"bytes,2,name=spec"`
}

// DeviceClassSpec holds what defines a class.
type DeviceClassSpec struct {
	// Selectors every device of the class must match.
	// +optional
	// +listType=atomic
	Selectors []DeviceSelector `json:"selectors,omitempty" protobuf:"bytes,1,opt,name=selectors"`

	// Config handed to drivers for devices allocated through this class.
	// +optional
	// +listType=atomic
	Config []DeviceClassConfiguration `json:"config,omitempty" protobuf:"bytes,2,opt,name=config"`

	// ExtendedResourceName is an extended resource name that pods may
	// request to get a device of this class.
	// +optional
	ExtendedResourceName *string `json:"extendedResourceName,omitempty" protobuf:"bytes,4,opt,name=extendedResourceName"`
}

// DeviceClassConfiguration is configuration from a class.
type DeviceClassConfiguration struct {
	DeviceConfiguration `json:"" protobuf:"bytes,1,opt,name=deviceConfiguration"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DeviceClassList is a list of DeviceClasses.
type DeviceClassList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of classes.
	Items []DeviceClass `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaimTemplate is used to create a ResourceClaim for each pod
// that names it.
type ResourceClaimTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec is copied into each generated claim. It is immutable.
	Spec ResourceClaimTemplateSpec `json:"spec" protobuf:"bytes,2,name=spec"`
}

// ResourceClaimTemplateSpec holds the metadata and spec of generated claims.
type ResourceClaimTemplateSpec struct {
	// Labels and annotations copied into generated claims. Other metadata
	// fields are rejected.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec of the generated claims.
	Spec ResourceClaimSpec `json:"spec" protobuf:"bytes,2,name=spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourceClaimTemplateList is a list of ResourceClaimTemplates.
type ResourceClaimTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of templates.
	Items []ResourceClaimTemplate `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// AllocatedDeviceStatus is status a driver reports for one allocated device.
type AllocatedDeviceStatus struct {
	// Driver of the device.
	Driver string `json:"driver" protobuf:"bytes,1,rep,name=driver"`
	// Pool of the device.
	Pool string `json:"pool" protobuf:"bytes,2,rep,name=pool"`
	// Device name.
	Device string `json:"device" protobuf:"bytes,3,rep,name=device"`

	// ShareID of the allocation, for devices with multiple allocations.
	// +optional
	ShareID *string `json:"shareID,omitempty" protobuf:"bytes,7,opt,name=shareID"`

	// Conditions of the device, e.g. Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions" protobuf:"bytes,4,opt,name=conditions"`

	// Data is driver-specific status; any JSON object, at most 10 KiB.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Data *runtime.RawExtension `json:"data,omitempty" protobuf:"bytes,5,opt,name=data"`

	// NetworkData describes the device's network interface.
	// +optional
	NetworkData *NetworkDeviceData `json:"networkData,omitempty" protobuf:"bytes,6,opt,name=networkData"`
}

// NetworkDeviceData describes a network device's interface.
type NetworkDeviceData struct {
	// InterfaceName is the name of the interface in the pod, at most 256 characters.
	// +optional
	InterfaceName string `json:"interfaceName,omitempty" protobuf:"bytes,1,opt,name=interfaceName"`

	// IPs in CIDR form, at most 16.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty" protobuf:"bytes,2,opt,name=ips"`

	// HardwareAddress is the MAC address, at most 128 characters.
	// +optional
	HardwareAddress string `json:"hardwareAddress,omitempty" protobuf:"bytes,3,opt,name=hardwareAddress"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list,watch
// +resourceName=resourcepools
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
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Status is the pool's current usage.
	// +optional
	Status ResourcePoolUsageStatus `json:"status,omitempty" protobuf:"bytes,2,opt,name=status"`
}

// ResourcePoolUsageStatus is the usage of one pool, as the allocator sees it.
type ResourcePoolUsageStatus struct {
	// Driver publishing the pool.
	Driver string `json:"driver" protobuf:"bytes,1,opt,name=driver"`

	// Pool is the pool's name.
	Pool string `json:"pool" protobuf:"bytes,2,opt,name=pool"`

	// Generation is the pool's newest generation; only its slices count.
	Generation int64 `json:"generation" protobuf:"varint,3,opt,name=generation"`

	// Complete is false when fewer or more slices of the newest generation
	// are visible than the pool announces.
	Complete bool `json:"complete" protobuf:"varint,4,opt,name=complete"`

	// Problem says why no device of the pool can be allocated (incomplete
	// or invalid pool); empty when they can.
	// +optional
	Problem string `json:"problem,omitempty" protobuf:"bytes,5,opt,name=problem"`

	// NodeName is the node of the pool's devices, when they are on one.
	// +optional
	NodeName string `json:"nodeName,omitempty" protobuf:"bytes,6,opt,name=nodeName"`

	// AllNodes is set when the devices are reachable from every node.
	// +optional
	AllNodes bool `json:"allNodes,omitempty" protobuf:"varint,7,opt,name=allNodes"`

	// NodeSelector selects the nodes the devices are reachable from.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty" protobuf:"bytes,8,opt,name=nodeSelector"`

	// PerDeviceNodeSelection is set when each device says where it is.
	// +optional
	PerDeviceNodeSelection bool `json:"perDeviceNodeSelection,omitempty" protobuf:"varint,9,opt,name=perDeviceNodeSelection"`

	// Devices counts the pool's devices.
	Devices ResourcePoolDeviceCounts `json:"devices" protobuf:"bytes,10,opt,name=devices"`

	// SharedCounters lists every counter of the pool's counter sets.
	// +optional
	// +listType=atomic
	SharedCounters []ResourcePoolCounter `json:"sharedCounters,omitempty" protobuf:"bytes,11,rep,name=sharedCounters"`

	// Capacity sums each consumable capacity over the devices that allow
	// multiple allocations.
	// +optional
	// +listType=atomic
	Capacity []ResourcePoolCapacity `json:"capacity,omitempty" protobuf:"bytes,12,rep,name=capacity"`

	// Classes lists the DeviceClasses that match at least one device of
	// the pool.
	// +optional
	// +listType=atomic
	Classes []ResourcePoolClass `json:"classes,omitempty" protobuf:"bytes,13,rep,name=classes"`
}

// ResourcePoolDeviceCounts counts a pool's devices. A device may be
// counted in several fields.
type ResourcePoolDeviceCounts struct {
	// Total is the number of devices in the newest generation.
	Total int32 `json:"total" protobuf:"varint,1,opt,name=total"`

	// Allocated devices hold at least one allocation without admin access:
	// exclusively, or a share of a device that allows several.
	Allocated int32 `json:"allocated" protobuf:"varint,2,opt,name=allocated"`

	// AdminAccess is the number of admin-access allocations, which do not
	// make a device busy.
	AdminAccess int32 `json:"adminAccess" protobuf:"varint,3,opt,name=adminAccess"`

	// Tainted counts devices with a NoSchedule or NoExecute taint, their
	// own or from a DeviceTaintRule.
	Tainted int32 `json:"tainted" protobuf:"varint,4,opt,name=tainted"`

	// TaintedNoSchedule counts devices with a NoSchedule taint.
	TaintedNoSchedule int32 `json:"taintedNoSchedule" protobuf:"varint,5,opt,name=taintedNoSchedule"`

	// TaintedNoExecute counts devices with a NoExecute taint.
	TaintedNoExecute int32 `json:"taintedNoExecute" protobuf:"varint,6,opt,name=taintedNoExecute"`

	// Unusable counts the devices of an incomplete or invalid pool.
	Unusable int32 `json:"unusable" protobuf:"varint,7,opt,name=unusable"`

	// Free devices can take one more allocation of a request without
	// tolerations: not held exclusively, untainted, their shared counters
	// not exhausted and, when shared, some capacity left.
	Free int32 `json:"free" protobuf:"varint,8,opt,name=free"`
}

// ResourcePoolCounter is the use of one shared counter.
type ResourcePoolCounter struct {
	// CounterSet is the name of the counter set.
	CounterSet string `json:"counterSet" protobuf:"bytes,1,opt,name=counterSet"`

	// Counter is the counter's name within the set.
	Counter string `json:"counter" protobuf:"bytes,2,opt,name=counter"`

	// Used is what allocated devices consume of it.
	Used resource.Quantity `json:"used" protobuf:"bytes,3,opt,name=used"`

	// Total is what the pool announces.
	Total resource.Quantity `json:"total" protobuf:"bytes,4,opt,name=total"`
}

// ResourcePoolCapacity is the use of one consumable capacity, summed over
// the pool's devices that allow multiple allocations.
type ResourcePoolCapacity struct {
	// Name of the capacity.
	Name QualifiedName `json:"name" protobuf:"bytes,1,opt,name=name,casttype=QualifiedName"`

	// Used is what the shares allocated so far consume.
	Used resource.Quantity `json:"used" protobuf:"bytes,2,opt,name=used"`

	// Total is the sum of the devices' capacities.
	Total resource.Quantity `json:"total" protobuf:"bytes,3,opt,name=total"`
}

// ResourcePoolClass is what one DeviceClass selects of the pool.
type ResourcePoolClass struct {
	// Name of the DeviceClass.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// Devices is how many devices of the pool the class selects.
	Devices int32 `json:"devices" protobuf:"varint,2,opt,name=devices"`

	// Free is how many of those are free.
	Free int32 `json:"free" protobuf:"varint,3,opt,name=free"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResourcePoolUsageList is a list of ResourcePoolUsages.
type ResourcePoolUsageList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of pools.
	Items []ResourcePoolUsage `json:"items" protobuf:"bytes,2,rep,name=items"`
}
