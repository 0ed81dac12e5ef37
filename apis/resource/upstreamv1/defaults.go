package upstreamv1

import (
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The defaults of resource.draplane.dev/v1, for k8s.io/api's types; the
// generated RegisterDefaults walks the objects to them.

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_ExactDeviceRequest makes an unspecified request ask for one device.
func SetDefaults_ExactDeviceRequest(obj *resourcev1.ExactDeviceRequest) {
	defaultCount(&obj.AllocationMode, &obj.Count)
}

// SetDefaults_DeviceSubRequest makes an unspecified alternative ask for one device.
func SetDefaults_DeviceSubRequest(obj *resourcev1.DeviceSubRequest) {
	defaultCount(&obj.AllocationMode, &obj.Count)
}

func defaultCount(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

// SetDefaults_DeviceToleration compares values unless told otherwise.
func SetDefaults_DeviceToleration(obj *resourcev1.DeviceToleration) {
	if obj.Operator == "" {
		obj.Operator = resourcev1.DeviceTolerationOpEqual
	}
}

// SetDefaults_DeviceTaint stamps a taint with the time it was first seen,
// to whole seconds so that the value survives a round trip through JSON.
func SetDefaults_DeviceTaint(obj *resourcev1.DeviceTaint) {
	if obj.TimeAdded == nil {
		obj.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}
