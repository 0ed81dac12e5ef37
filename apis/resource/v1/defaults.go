package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_ExactDeviceRequest makes an unspecified request ask for one device.
func SetDefaults_ExactDeviceRequest(obj *ExactDeviceRequest) {
	defaultCount(&obj.AllocationMode, &obj.Count)
}

// SetDefaults_DeviceSubRequest makes an unspecified alternative ask for one device.
func SetDefaults_DeviceSubRequest(obj *DeviceSubRequest) {
	defaultCount(&obj.AllocationMode, &obj.Count)
}

func defaultCount(mode *DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = DeviceAllocationModeExactCount
	}
	if *mode == DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

// SetDefaults_DeviceToleration compares values unless told otherwise.
func SetDefaults_DeviceToleration(obj *DeviceToleration) {
	if obj.Operator == "" {
		obj.Operator = DeviceTolerationOpEqual
	}
}

// SetDefaults_DeviceTaint stamps a taint with the time it was first seen,
// to whole seconds so that the value survives a round trip through JSON.
func SetDefaults_DeviceTaint(obj *DeviceTaint) {
	if obj.TimeAdded == nil {
		obj.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}
