// Package features holds the DRA feature gates dra-apiserver honours, under
// upstream Kubernetes' names and with the defaults kube-apiserver 1.37 gives
// them, so that a `--feature-gates` line written for a cluster means the
// same thing here.
//
// The gates are added to k8s.io/apiserver's process-wide feature gate (the
// one `--feature-gates` sets and the generic server reads), versioned like
// upstream's, so the default is the one of the emulated Kubernetes version
// (1.37).
package features

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	// Imported for its init, which must run before ours: it registers
	// the "kube" component and sets the gate's emulation version to the
	// binary's (see emulateKubernetes).
	_ "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	baseversion "k8s.io/component-base/version"
)

// Gates that govern a field or a behaviour of the API we serve. Each
// comment says what turning it off changes here.
const (
	// DRAAdminAccess: requests with adminAccess (GA, locked on).
	DRAAdminAccess featuregate.Feature = "DRAAdminAccess"
	// DRAConsumableCapacity: capacity requests, requestPolicy,
	// allowMultipleAllocations, shareID and consumedCapacity.
	DRAConsumableCapacity featuregate.Feature = "DRAConsumableCapacity"
	// DRADerivedAttributes: derivedAttributes of exact requests and
	// subrequests (alpha).
	DRADerivedAttributes featuregate.Feature = "DRADerivedAttributes"
	// DRADeviceBindingConditions: bindingConditions,
	// bindingFailureConditions and bindsToNode of devices; pods wait to
	// be bound until the conditions are met.
	DRADeviceBindingConditions featuregate.Feature = "DRADeviceBindingConditions"
	// DRADeviceCompatibilityGroups: compatibilityGroups of counter
	// consumptions (alpha).
	DRADeviceCompatibilityGroups featuregate.Feature = "DRADeviceCompatibilityGroups"
	// DRADeviceTaintRules: what DeviceTaintRules do; while it is off the
	// kind is still served (for clean-up) but no rule taints a device.
	DRADeviceTaintRules featuregate.Feature = "DRADeviceTaintRules"
	// DRADeviceTaints: taints in slices and tolerations in requests; while
	// it is off no taint counts and no pod is evicted for one.
	DRADeviceTaints featuregate.Feature = "DRADeviceTaints"
	// DRAExtendedResource: extendedResourceName of DeviceClasses and
	// pods that ask for extended resources backed by devices (GA, locked
	// on).
	DRAExtendedResource featuregate.Feature = "DRAExtendedResource"
	// DRAFractionalCapacityRange: milli-unit steps of a capacity's
	// requestPolicy range; while it is off, steps are whole units.
	DRAFractionalCapacityRange featuregate.Feature = "DRAFractionalCapacityRange"
	// DRAListTypeAttributes: the list attributes ints, bools, strings and
	// versions (alpha).
	DRAListTypeAttributes featuregate.Feature = "DRAListTypeAttributes"
	// DRANodeAllocatableResources: nodeAllocatableResources of devices
	// (alpha).
	DRANodeAllocatableResources featuregate.Feature = "DRANodeAllocatableResources"
	// DRAOptionalNodeOperations: skipNodeOperations of slices and
	// allocation results (alpha).
	DRAOptionalNodeOperations featuregate.Feature = "DRAOptionalNodeOperations"
	// DRAPartitionableDevices: sharedCounters, consumesCounters and
	// perDeviceNodeSelection.
	DRAPartitionableDevices featuregate.Feature = "DRAPartitionableDevices"
	// DRAPartitionableDevicesType: partitionTypeAttribute of slices
	// (alpha).
	DRAPartitionableDevicesType featuregate.Feature = "DRAPartitionableDevicesType"
	// DRAPrioritizedList: firstAvailable (GA, locked on).
	DRAPrioritizedList featuregate.Feature = "DRAPrioritizedList"
	// DRAResourceClaimDeviceStatus: status.devices of claims (GA, locked
	// on).
	DRAResourceClaimDeviceStatus featuregate.Feature = "DRAResourceClaimDeviceStatus"
	// DRAWorkloadResourceClaims: resourceClaims of PodGroups and their
	// status.resourceClaimStatuses; while it is off, the fields are
	// dropped on create and unchanged updates.
	DRAWorkloadResourceClaims featuregate.Feature = "DRAWorkloadResourceClaims"
	// GenericWorkload: scheduling.k8s.io/v1beta1 PodGroups (served by
	// core-lite in standalone mode), pods' spec.schedulingGroup, and
	// gang placement of a PodGroup's pods. While it is off PodGroups are
	// not served and spec.schedulingGroup is dropped.
	GenericWorkload featuregate.Feature = "GenericWorkload"
	// TopologyAwareWorkloadScheduling: schedulingConstraints of
	// PodGroups (all pods of the group on nodes sharing one value of a
	// node label).
	TopologyAwareWorkloadScheduling featuregate.Feature = "TopologyAwareWorkloadScheduling"
)

// versioned are the gates with their upstream history; the entry of the
// emulated version gives the default and whether it may be changed.
var versioned = map[featuregate.Feature]featuregate.VersionedSpecs{
	DRAAdminAccess: {
		{Version: version.MustParse("1.32"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	DRAConsumableCapacity: {
		{Version: version.MustParse("1.34"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
	},
	DRADerivedAttributes: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
	DRADeviceBindingConditions: {
		{Version: version.MustParse("1.34"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
	},
	DRADeviceCompatibilityGroups: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
	DRADeviceTaintRules: {
		{Version: version.MustParse("1.35"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.36"), Default: false, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.GA},
	},
	DRADeviceTaints: {
		{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.GA},
	},
	DRAExtendedResource: {
		{Version: version.MustParse("1.34"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	// Beta at 1.37 but on by default only when every API server of the
	// control plane is at least 1.37 (--min-compatibility-version=1.37);
	// with the default minimum compatibility (1.36) it is off.
	DRAFractionalCapacityRange: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.Beta, MinCompatibilityVersion: version.MustParse("1.37")},
	},
	DRAListTypeAttributes: {
		{Version: version.MustParse("1.36"), Default: false, PreRelease: featuregate.Alpha},
	},
	DRANodeAllocatableResources: {
		{Version: version.MustParse("1.36"), Default: false, PreRelease: featuregate.Alpha},
	},
	DRAOptionalNodeOperations: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
	DRAPartitionableDevices: {
		{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
	},
	DRAPartitionableDevicesType: {
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
	},
	DRAPrioritizedList: {
		{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.GA},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	DRAResourceClaimDeviceStatus: {
		{Version: version.MustParse("1.32"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.33"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.37"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	DRAWorkloadResourceClaims: {
		{Version: version.MustParse("1.36"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Beta},
	},
	GenericWorkload: {
		{Version: version.MustParse("1.35"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Beta},
	},
	TopologyAwareWorkloadScheduling: {
		{Version: version.MustParse("1.36"), Default: false, PreRelease: featuregate.Alpha},
	},
}

func init() {
	runtime.Must(utilfeature.DefaultMutableFeatureGate.AddVersioned(versioned))
	runtime.Must(emulateKubernetes(utilfeature.DefaultMutableFeatureGate))
}

// emulateKubernetes makes the gate emulate the Kubernetes version whose
// API we implement. k8s.io/apiserver sets the gate to the version stamped
// into the binary, which our builds (`make build`, the e2e tests) stamp
// with our own 0.x release: emulating Kubernetes 0.x, every DRA gate
// would be off, and --feature-gates would be read against that version.
func emulateKubernetes(gate featuregate.MutableVersionedFeatureGate) error {
	kube := basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	if !gate.EmulationVersion().LessThan(kube.EmulationVersion()) {
		return nil
	}
	return gate.SetEmulationVersionAndMinCompatibilityVersion(kube.EmulationVersion(), kube.MinCompatibilityVersion())
}

// Enabled reports whether a gate is on in this process.
func Enabled(f featuregate.Feature) bool { return utilfeature.DefaultFeatureGate.Enabled(f) }

// Known lists the gates of this package, for help texts and the README.
func Known() []featuregate.Feature {
	out := make([]featuregate.Feature, 0, len(versioned))
	for f := range versioned {
		out = append(out, f)
	}
	return out
}
