package allocator

import (
	"slices"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// capacityPolicy is a CapacityRequestPolicy in milli-units.
type capacityPolicy struct {
	hasDefault bool
	def        int64
	// values are the valid values, sorted; used when there is no range.
	values   []int64
	hasRange bool
	min      int64
	hasMax   bool
	max      int64
	step     int64 // 0: any value in the range
}

func newCapacityPolicy(p *resourceapi.CapacityRequestPolicy) *capacityPolicy {
	if p == nil {
		return nil
	}
	out := &capacityPolicy{}
	if p.Default != nil {
		out.hasDefault, out.def = true, p.Default.MilliValue()
	}
	if r := p.ValidRange; r != nil && r.Min != nil {
		out.hasRange, out.min = true, r.Min.MilliValue()
		if r.Max != nil {
			out.hasMax, out.max = true, r.Max.MilliValue()
		}
		if r.Step != nil {
			out.step = r.Step.MilliValue()
		}
		return out
	}
	for i := range p.ValidValues {
		out.values = append(out.values, p.ValidValues[i].MilliValue())
	}
	slices.Sort(out.values)
	return out
}

// consumedQuantity applies the request policy to one requested amount in
// milli-units; without a request the policy's default or the whole
// capacity is consumed. ok is false when the policy does not allow the
// amount.
func consumedQuantity(asked bool, v int64, c *deviceCapacity) (int64, bool) {
	p := c.policy
	if !asked {
		if p != nil && p.hasDefault {
			return p.def, true
		}
		return c.total, true
	}
	if v < 0 {
		return 0, false
	}
	switch {
	case p == nil:
		return v, true
	case p.hasRange:
		v = max(v, p.min)
		if p.step > 0 {
			if rem := (v - p.min) % p.step; rem != 0 {
				v += p.step - rem
			}
		}
		if p.hasMax && v > p.max {
			return 0, false
		}
		return v, true
	case len(p.values) > 0:
		i, _ := slices.BinarySearch(p.values, v)
		if i == len(p.values) {
			return 0, false
		}
		return p.values[i], true
	}
	return v, true
}
