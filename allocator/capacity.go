package allocator

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// capacityFit computes what a request consumes of each capacity of the
// device, after rounding by the device's request policy, and whether that
// fits into what the existing allocations leave. The consumption is only
// returned for devices that allow multiple allocations: an exclusively
// allocated device needs no accounting.
func capacityFit(req *resourceapi.CapacityRequirements, d *device, st *State) ([]int64, bool) {
	if len(d.caps) == 0 {
		return nil, req == nil || len(req.Requests) == 0
	}
	var requested []*resource.Quantity
	if req != nil && len(req.Requests) > 0 {
		requested = make([]*resource.Quantity, len(d.caps))
		for name, q := range req.Requests {
			i := capacityIndex(d, name)
			if i < 0 || requested[i] != nil {
				// Unknown capacity, or the same one named twice.
				return nil, false
			}
			requested[i] = &q
		}
	}
	consume := make([]int64, len(d.caps))
	var used []int64
	if d.multi {
		used = st.capUsed[d.index]
	}
	for i := range d.caps {
		c := &d.caps[i]
		var q *resource.Quantity
		if requested != nil {
			q = requested[i]
		}
		v, ok := consumedQuantity(q, c)
		if !ok {
			return nil, false
		}
		if used != nil {
			v += used[i]
		}
		if v > c.total {
			return nil, false
		}
		consume[i] = v
		if used != nil {
			consume[i] -= used[i]
		}
	}
	if !d.multi {
		return nil, true
	}
	return consume, true
}

// consumedQuantity applies the request policy to one requested amount
// (nil: not requested), in milli-units. ok is false when the policy does
// not allow the amount.
func consumedQuantity(q *resource.Quantity, c *deviceCapacity) (int64, bool) {
	p := c.policy
	if q == nil {
		if p != nil && p.Default != nil {
			return p.Default.MilliValue(), true
		}
		return c.total, true
	}
	v := q.MilliValue()
	if v < 0 {
		return 0, false
	}
	if p == nil {
		return v, true
	}
	switch {
	case p.ValidRange != nil && p.ValidRange.Min != nil:
		lo := p.ValidRange.Min.MilliValue()
		if v < lo {
			v = lo
		}
		if p.ValidRange.Step != nil {
			step := p.ValidRange.Step.MilliValue()
			if step > 0 {
				if rem := (v - lo) % step; rem != 0 {
					v += step - rem
				}
			}
		}
		if p.ValidRange.Max != nil && v > p.ValidRange.Max.MilliValue() {
			return 0, false
		}
		return v, true
	case len(p.ValidValues) > 0:
		values := make([]int64, len(p.ValidValues))
		for i := range p.ValidValues {
			values[i] = p.ValidValues[i].MilliValue()
		}
		slices.Sort(values)
		for _, allowed := range values {
			if allowed >= v {
				return allowed, true
			}
		}
		return 0, false
	}
	return v, true
}
