package allocator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Builders that keep the tables short.

const testDriver = "drv"

func mkNode(name string, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		n.Labels[k] = v
	}
	return n
}

func mkClass(name string, exprs ...string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		c.Spec.Selectors = append(c.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return c
}

func classes(cs ...*resourceapi.DeviceClass) map[string]*resourceapi.DeviceClass {
	m := map[string]*resourceapi.DeviceClass{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

type devOpt func(*resourceapi.Device)

func mkDev(name string, opts ...devOpt) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for _, o := range opts {
		o(&d)
	}
	return d
}

func attr(name, value string) devOpt {
	return func(d *resourceapi.Device) {
		d.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{StringValue: new(value)}
	}
}

func intAttr(name string, value int64) devOpt {
	return func(d *resourceapi.Device) {
		d.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{IntValue: new(value)}
	}
}

func taint(key, value string, effect resourceapi.DeviceTaintEffect) devOpt {
	return func(d *resourceapi.Device) {
		d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: key, Value: value, Effect: effect})
	}
}

func consumes(set string, counter string, amount int64) devOpt {
	return func(d *resourceapi.Device) {
		d.ConsumesCounters = append(d.ConsumesCounters, resourceapi.DeviceCounterConsumption{
			CounterSet: set, Counters: map[string]resourceapi.Counter{counter: {Value: qty(amount)}}})
	}
}

func shared(capName string, total int64, policy *resourceapi.CapacityRequestPolicy) devOpt {
	return func(d *resourceapi.Device) {
		d.AllowMultipleAllocations = new(true)
		if d.Capacity == nil {
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
		}
		d.Capacity[resourceapi.QualifiedName(capName)] = resourceapi.DeviceCapacity{Value: qty(total), RequestPolicy: policy}
	}
}

func bindingConditions(conds ...string) devOpt {
	return func(d *resourceapi.Device) { d.BindingConditions = conds }
}

func bindsToNode() devOpt { return func(d *resourceapi.Device) { d.BindsToNode = new(true) } }

func devNode(node string) devOpt { return func(d *resourceapi.Device) { d.NodeName = new(node) } }

func qty(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }

type sliceOpt func(*resourceapi.ResourceSlice)

// mkSlice makes a slice of a one-slice pool on a node; options change the
// node selection and the pool.
func mkSlice(pool, node string, devs []resourceapi.Device, opts ...sliceOpt) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: pool + "-" + node},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:  testDriver,
			Pool:    resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
			Devices: devs,
		},
	}
	if node != "" {
		s.Spec.NodeName = new(node)
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func allNodes() sliceOpt {
	return func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = nil; s.Spec.AllNodes = new(true) }
}

func labelSelector(key, value string) sliceOpt {
	return func(s *resourceapi.ResourceSlice) {
		s.Spec.NodeName = nil
		s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}
	}
}

func perDevice() sliceOpt {
	return func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = nil; s.Spec.PerDeviceNodeSelection = new(true) }
}

func generation(gen, count int64) sliceOpt {
	return func(s *resourceapi.ResourceSlice) {
		s.Spec.Pool.Generation, s.Spec.Pool.ResourceSliceCount = gen, count
		s.Name = fmt.Sprintf("%s-g%d", s.Name, gen)
	}
}

// named renames a slice, for pools of several slices.
func named(name string) sliceOpt {
	return func(s *resourceapi.ResourceSlice) { s.Name = name }
}

func counterSet(name string, counters map[string]int64) sliceOpt {
	return func(s *resourceapi.ResourceSlice) {
		cs := resourceapi.CounterSet{Name: name, Counters: map[string]resourceapi.Counter{}}
		for k, v := range counters {
			cs.Counters[k] = resourceapi.Counter{Value: qty(v)}
		}
		s.Spec.SharedCounters = append(s.Spec.SharedCounters, cs)
	}
}

// numbered returns n names prefix00, prefix01, ...
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func devs(names ...string) []resourceapi.Device {
	out := make([]resourceapi.Device, len(names))
	for i, n := range names {
		out[i] = mkDev(n)
	}
	return out
}

type reqOpt func(*resourceapi.ExactDeviceRequest)

func mkReq(name, class string, count int64, opts ...reqOpt) resourceapi.DeviceRequest {
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, o := range opts {
		o(e)
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: e}
}

func allMode() reqOpt {
	return func(e *resourceapi.ExactDeviceRequest) {
		e.AllocationMode, e.Count = resourceapi.DeviceAllocationModeAll, 0
	}
}

func selector(expr string) reqOpt {
	return func(e *resourceapi.ExactDeviceRequest) {
		e.Selectors = append(e.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}})
	}
}

func admin() reqOpt { return func(e *resourceapi.ExactDeviceRequest) { e.AdminAccess = new(true) } }

func tolerate(key string, op resourceapi.DeviceTolerationOperator, value string) reqOpt {
	return func(e *resourceapi.ExactDeviceRequest) {
		e.Tolerations = append(e.Tolerations, resourceapi.DeviceToleration{Key: key, Operator: op, Value: value})
	}
}

func capacityReq(name string, v int64) reqOpt {
	return func(e *resourceapi.ExactDeviceRequest) {
		e.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{resourceapi.QualifiedName(name): qty(v)}}
	}
}

func firstAvailable(name string, subs ...resourceapi.DeviceSubRequest) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, FirstAvailable: subs}
}

func sub(name, class string, count int64, exprs ...string) resourceapi.DeviceSubRequest {
	s := resourceapi.DeviceSubRequest{Name: name, DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, e := range exprs {
		s.Selectors = append(s.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return s
}

func mkClaim(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}},
	}
}

func withConstraint(c *resourceapi.ResourceClaim, match bool, attribute string, requests ...string) *resourceapi.ResourceClaim {
	dc := resourceapi.DeviceConstraint{Requests: requests}
	name := resourceapi.FullyQualifiedName(attribute)
	if match {
		dc.MatchAttribute = &name
	} else {
		dc.DistinctAttribute = &name
	}
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, dc)
	return c
}

// used is a prior allocation of devices, exclusive ("pool/dev") or shared
// ("pool/dev=capacity:amount").
func used(ids ...string) []*resourceapi.AllocationResult {
	var out []*resourceapi.AllocationResult
	for _, id := range ids {
		id, share, isShared := strings.Cut(id, "=")
		pool, dev, _ := strings.Cut(id, "/")
		r := resourceapi.DeviceRequestAllocationResult{Request: "old", Driver: testDriver, Pool: pool, Device: dev}
		if isShared {
			r.ShareID = new(types.UID("old"))
			name, amount, _ := strings.Cut(share, ":")
			var v int64
			fmt.Sscan(amount, &v)
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{resourceapi.QualifiedName(name): qty(v)}
		}
		out = append(out, &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}})
	}
	return out
}

// picked lists the allocation as "request:pool/device" per claim.
func picked(res Result) [][]string {
	var out [][]string
	for _, a := range res.Allocations {
		var ids []string
		for _, r := range a.Devices.Results {
			ids = append(ids, r.Request+":"+r.Pool+"/"+r.Device)
		}
		out = append(out, ids)
	}
	return out
}

// split moves the counter sets of a slice into a second slice of the same
// pool, the shape validation requires.
func split(s *resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	counters := s.DeepCopy()
	counters.Name += "-counters"
	counters.Spec.Devices = nil
	s.Spec.SharedCounters = nil
	s.Spec.Pool.ResourceSliceCount = 2
	counters.Spec.Pool.ResourceSliceCount = 2
	return []*resourceapi.ResourceSlice{s, counters}
}
