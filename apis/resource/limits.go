package resource

// Names this project gives to things it marks on objects.
const (
	// Finalizer protects an allocated claim from deletion until it is
	// deallocated.
	Finalizer = "resource.draplane.dev/delete-protection"

	// PodClaimNameAnnotation on a generated claim names the pod claim
	// (entry in pod.spec.resourceClaims) it was generated for.
	PodClaimNameAnnotation = "resource.draplane.dev/pod-claim-name"
)

// Field selectors supported on ResourceSlices.
const (
	ResourceSliceSelectorNodeName = "spec.nodeName"
	ResourceSliceSelectorDriver   = "spec.driver"
	ResourceSliceSelectorPoolName = "spec.pool.name"

	// Field selectors of ResourcePools.
	ResourcePoolSelectorDriver   = "status.driver"
	ResourcePoolSelectorNodeName = "status.nodeName"
)

// Size limits, the same numbers upstream enforces so that objects valid
// here are valid there.
const (
	DriverNameMaxLength           = 63
	PoolNameMaxLength             = 253
	DeviceMaxDomainLength         = 63
	DeviceMaxIDLength             = 32
	DeviceAttributeMaxValueLength = 64

	ResourceSliceMaxDevices                             = 128
	ResourceSliceMaxDevicesWithAdvancedFeatures         = 64
	ResourceSliceMaxCounterSets                         = 8
	ResourceSliceMaxCountersPerCounterSet               = 32
	ResourceSliceMaxDeviceCounterConsumptionsPerDevice  = 2
	ResourceSliceMaxCountersPerDeviceCounterConsumption = 32
	ResourceSliceMaxAttributesAndCapacitiesPerDevice    = 32
	// ResourceSliceMaxAttributeValuesPerDevice counts every item of a
	// list attribute (and one per scalar attribute).
	ResourceSliceMaxAttributeValuesPerDevice = 48
	DeviceCompatibilityGroupsMaxSize         = 2
	DeviceDerivedAttributesMaxSize           = 32

	BindingConditionsMaxSize        = 4
	BindingFailureConditionsMaxSize = 4
	DeviceTaintsMaxLength           = 16
	DeviceTolerationsMaxLength      = 16

	AllocationResultsMaxSize           = 32
	DeviceRequestsMaxSize              = AllocationResultsMaxSize
	DeviceConstraintsMaxSize           = 32
	DeviceConfigMaxSize                = 32
	DeviceSelectorsMaxSize             = 32
	FirstAvailableDeviceRequestMaxSize = 8

	CELSelectorExpressionMaxCost   = 1000000
	CELSelectorExpressionMaxLength = 10 * 1024
	OpaqueParametersMaxLength      = 10 * 1024

	ResourceClaimReservedForMaxSize    = 256
	DeviceTaintRuleStatusMaxConditions = 8

	NetworkDeviceDataInterfaceNameMaxLength   = 256
	NetworkDeviceDataHardwareAddressMaxLength = 128
	NetworkDeviceDataMaxIPs                   = 16
	DeviceCapacityValidValuesMaxSize          = 10
)

// DeviceTaintConditionEvictionInProgress is the DeviceTaintRule condition
// that reports pending and finished evictions.
const DeviceTaintConditionEvictionInProgress = "EvictionInProgress"
