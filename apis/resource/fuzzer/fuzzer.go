// Package fuzzer fills resource.draplane.dev objects with random values
// that are already defaulted and survive conversion, so that round-trip
// tests compare like with like.
package fuzzer

import (
	"fmt"

	"sigs.k8s.io/randfill"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/v1beta1"
)

// Funcs returns the fuzz functions of the group, for the hub and for the
// external shapes that differ from it.
func Funcs(_ runtimeserializer.CodecFactory) []any {
	return append(hubFuncs(), v1beta1Funcs()...)
}

// hubFuncs fill the hub types (and the values every version shares) the
// way a decoded, defaulted object looks.
func hubFuncs() []any {
	return []any{
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
		},
		func(ext *runtime.RawExtension, c randfill.Continue) {
			// Opaque parameters are JSON objects; keep them in the compact
			// form a decoder produces.
			ext.Raw = fmt.Appendf(nil, `{"key%d":"value%d"}`, c.Intn(10), c.Intn(10))
			ext.Object = nil
		},
		func(r *resourceapi.DeviceRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			// An exact request with no fields set looks, in v1beta1, like
			// no exact request at all; give it a class so it stays one.
			if r.Exactly != nil && r.Exactly.DeviceClassName == "" {
				r.Exactly.DeviceClassName = "class"
			}
		},
		func(r *resourceapi.ExactDeviceRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			defaultCount(&r.AllocationMode, &r.Count, c)
		},
		func(r *resourceapi.DeviceSubRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			defaultCount(&r.AllocationMode, &r.Count, c)
		},
		func(t *resourceapi.DeviceToleration, c randfill.Continue) {
			c.FillNoCustom(t)
			if t.Operator == "" {
				t.Operator = resourceapi.DeviceTolerationOpEqual
			}
		},
		func(t *resourceapi.DeviceTaint, c randfill.Continue) {
			c.FillNoCustom(t)
			if t.TimeAdded == nil {
				t.TimeAdded = &metav1.Time{}
				c.Fill(t.TimeAdded)
			}
		},
		func(s *resourceapi.ResourceSliceSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			// v1beta1 has no way to say "nodeName set to empty" or
			// "allNodes: false": both mean unset there.
			if s.NodeName != nil && *s.NodeName == "" {
				s.NodeName = nil
			}
			if s.AllNodes != nil && !*s.AllNodes {
				s.AllNodes = nil
			}
		},
	}
}

// v1beta1Funcs fill the external v1beta1 shapes, used when fuzzing v1beta1
// objects directly.
func v1beta1Funcs() []any {
	return []any{
		func(d *v1beta1.Device, c randfill.Continue) {
			c.FillNoCustom(d)
			if d.Basic == nil {
				d.Basic = &v1beta1.BasicDevice{}
			}
		},
		func(r *v1beta1.DeviceRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			if r.DeviceClassName == "" {
				// Without a class the flat fields are not defaulted and
				// would be dropped by conversion; a request is then a
				// firstAvailable one.
				r.Selectors, r.AllocationMode, r.Count, r.AdminAccess, r.Tolerations, r.Capacity = nil, "", 0, nil, nil, nil
				return
			}
			mode := resourceapi.DeviceAllocationMode(r.AllocationMode)
			defaultCount(&mode, &r.Count, c)
			r.AllocationMode = v1beta1.DeviceAllocationMode(mode)
		},
		func(t *v1beta1.DeviceToleration, c randfill.Continue) {
			c.FillNoCustom(t)
			if t.Operator == "" {
				t.Operator = v1beta1.DeviceTolerationOpEqual
			}
		},
		func(t *v1beta1.DeviceTaint, c randfill.Continue) {
			c.FillNoCustom(t)
			if t.TimeAdded == nil {
				t.TimeAdded = &metav1.Time{}
				c.Fill(t.TimeAdded)
			}
		},
		func(r *v1beta1.DeviceSubRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			mode := resourceapi.DeviceAllocationMode(r.AllocationMode)
			defaultCount(&mode, &r.Count, c)
			r.AllocationMode = v1beta1.DeviceAllocationMode(mode)
		},
	}
}

// defaultCount leaves the mode and count as defaulting would: a valid mode,
// and a positive count for ExactCount.
func defaultCount(mode *resourceapi.DeviceAllocationMode, count *int64, c randfill.Continue) {
	if c.Bool() {
		*mode = resourceapi.DeviceAllocationModeAll
	} else {
		*mode = resourceapi.DeviceAllocationModeExactCount
	}
	if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}
