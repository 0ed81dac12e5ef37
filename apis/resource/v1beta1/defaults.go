package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_DeviceRequest defaults the flat exact-request fields. A
// request without a class name is a firstAvailable request (or invalid):
// its count and mode stay unset so validation can tell the shapes apart.
func SetDefaults_DeviceRequest(obj *DeviceRequest) {
	if obj.DeviceClassName == "" {
		return
	}
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

// SetDefaults_DeviceTaint stamps a taint with the time it was first seen.
func SetDefaults_DeviceTaint(obj *DeviceTaint) {
	if obj.TimeAdded == nil {
		obj.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}
