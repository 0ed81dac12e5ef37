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
	// wholeUnits: requests, min and step are rounded up to whole units
	// for the step arithmetic (minWhole, stepWhole).
	wholeUnits          bool
	minWhole, stepWhole int64
}

func newCapacityPolicy(p *resourceapi.CapacityRequestPolicy, wholeUnitSteps bool) *capacityPolicy {
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
			if wholeUnitSteps {
				// Value() rounds up to a whole unit.
				out.wholeUnits, out.minWhole, out.stepWhole = true, r.Min.Value()*1000, r.Step.Value()*1000
			}
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
		switch {
		case v <= p.min:
			v = p.min
		case p.wholeUnits && p.stepWhole > 0:
			v = roundUpToStep(roundUpToStep(v, 0, 1000), p.minWhole, p.stepWhole)
		case p.step > 0:
			v = roundUpToStep(v, p.min, p.step)
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

// roundUpToStep returns the smallest min + n*step that is at least v
// (v >= min, step > 0).
func roundUpToStep(v, minValue, step int64) int64 {
	if rem := (v - minValue) % step; rem != 0 {
		v += step - rem
	}
	return v
}
