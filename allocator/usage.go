package allocator

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// PoolUsage counts the devices of one resource pool the way the allocator
// sees them in a State: what exists, what is taken, what a new request
// without tolerations could still get.
type PoolUsage struct {
	ID         PoolID
	Generation int64
	// Complete is false when the newest generation does not have exactly
	// the announced number of slices.
	Complete bool
	// Problem says why the pool cannot be used (incomplete or invalid);
	// empty when it can.
	Problem string

	// Where the devices are, taken from the pool's first slice: a node,
	// all nodes or a node selector. PerDevice is set when the slices
	// leave that to each device.
	NodeName     string
	AllNodes     bool
	NodeSelector *corev1.NodeSelector
	PerDevice    bool

	// Devices is the number of devices in the newest generation.
	Devices int
	// Allocated devices have at least one allocation other than admin
	// access (exclusive, or a share of a device that allows several).
	Allocated int
	// AdminAccess counts admin-access allocations, which do not make a
	// device busy.
	AdminAccess int
	// Tainted counts devices with a NoSchedule or NoExecute taint.
	Tainted int
	// TaintedNoSchedule and TaintedNoExecute count devices with at least
	// one taint of that effect (a device may be in both).
	TaintedNoSchedule int
	TaintedNoExecute  int
	// Unusable counts devices of a pool that is incomplete or invalid.
	Unusable int
	// Free devices can take one more allocation of a request without
	// tolerations: usable pool, not held exclusively, untainted, not left
	// out for their binding conditions (Snapshot.WithoutBindingConditions),
	// their counters not exhausted and, when shared, some capacity left.
	Free int

	Counters   []CounterUsage
	Capacities []CapacityUsage
	Classes    []ClassUsage
}

// CounterUsage is one shared counter of a pool.
type CounterUsage struct {
	CounterSet, Counter string
	Used, Total         resource.Quantity
}

// CapacityUsage sums one consumable capacity over the pool's devices that
// allow multiple allocations.
type CapacityUsage struct {
	Name        resourceapi.QualifiedName
	Used, Total resource.Quantity
}

// ClassUsage is how many devices of a pool a DeviceClass selects, and how
// many of those are free.
type ClassUsage struct {
	Class          string
	Devices, Free  int
	SelectorErrors int
}

// Usage reports every pool of the inventory with the allocations of the
// state, sorted by driver and pool. Class selectors are evaluated with the
// inventory's cache; a selector that fails to compile matches no device.
func (s *State) Usage(ctx context.Context) []PoolUsage {
	inv := s.inv
	out := make([]PoolUsage, 0, len(inv.pools))
	classNames := make([]string, 0, len(inv.classes))
	for name := range inv.classes {
		classNames = append(classNames, name)
	}
	slices.Sort(classNames)

	for _, p := range inv.pools {
		u := s.newPoolUsage(p)
		s.countPool(ctx, p, &u, classNames)
		out = append(out, u)
	}
	return out
}

func (s *State) newPoolUsage(p *pool) PoolUsage {
	u := PoolUsage{ID: p.id, Generation: p.generation, Complete: p.incomplete == ""}
	if p.unusable() {
		u.Problem = p.problem()
	}
	if len(p.slices) > 0 {
		sl := p.slices[0]
		u.NodeName = deref(sl.Spec.NodeName)
		u.AllNodes = deref(sl.Spec.AllNodes)
		u.NodeSelector = sl.Spec.NodeSelector
		u.PerDevice = deref(sl.Spec.PerDeviceNodeSelection)
	}
	return u
}

// countPool fills in the device counts, counters, capacities and classes.
func (s *State) countPool(ctx context.Context, p *pool, u *PoolUsage, classNames []string) {
	inv := s.inv
	free := make([]bool, len(p.devices))
	capTotals := map[resourceapi.QualifiedName][2]int64{}
	var capNames []resourceapi.QualifiedName
	capFormats := map[resourceapi.QualifiedName]resource.Format{}
	for i, d := range p.devices {
		u.Devices++
		u.AdminAccess += s.admin[d.index]
		if s.busy[d.index] || s.shared[d.index] {
			u.Allocated++
		}
		tainted := untolerated(d.taints, nil) != nil
		if tainted {
			u.Tainted++
		}
		if hasEffect(d.taints, resourceapi.DeviceTaintEffectNoSchedule) {
			u.TaintedNoSchedule++
		}
		if hasEffect(d.taints, resourceapi.DeviceTaintEffectNoExecute) {
			u.TaintedNoExecute++
		}
		if d.multi {
			used := s.capUsed[d.index]
			for ci, c := range d.caps {
				v, ok := capTotals[c.name]
				if !ok {
					capNames = append(capNames, c.name)
					capFormats[c.name] = c.format
				}
				v[1] += c.total
				if used != nil {
					v[0] += used[ci]
				}
				capTotals[c.name] = v
			}
		}
		if p.unusable() {
			u.Unusable++
			continue
		}
		free[i] = !tainted && !inv.withheld(d) && !s.busy[d.index] && countersFree(d, s) && !s.capacityExhausted(d)
		if free[i] {
			u.Free++
		}
	}

	for _, ci := range p.counters {
		set, counter, _ := strings.Cut(strings.TrimPrefix(inv.counterNames[ci], p.id.String()+"/"), "/")
		total := inv.counterTotals[ci]
		u.Counters = append(u.Counters, CounterUsage{
			CounterSet: set, Counter: counter,
			Used:  *resource.NewMilliQuantity(total-s.counterFree[ci], inv.counterFormats[ci]),
			Total: *resource.NewMilliQuantity(total, inv.counterFormats[ci]),
		})
	}
	slices.Sort(capNames)
	for _, name := range capNames {
		v := capTotals[name]
		u.Capacities = append(u.Capacities, CapacityUsage{Name: name,
			Used:  *resource.NewMilliQuantity(v[0], capFormats[name]),
			Total: *resource.NewMilliQuantity(v[1], capFormats[name])})
	}

	for _, name := range classNames {
		if cu, ok := s.countClass(ctx, p, name, free); ok {
			u.Classes = append(u.Classes, cu)
		}
	}
}

// countClass counts the devices of the pool that the class matches and how
// many of them are free (free is indexed like p.devices). It returns false
// when the class is not shown for the pool: one of its selectors is not CEL
// or does not compile, or it matches no device and no selector failed.
func (s *State) countClass(ctx context.Context, p *pool, name string, free []bool) (ClassUsage, bool) {
	cu := ClassUsage{Class: name}
	var exprs []*exprCache
	for _, sel := range s.inv.classes[name].Spec.Selectors {
		if sel.CEL == nil {
			return cu, false
		}
		e := s.inv.expr(sel.CEL.Expression)
		if e.compileErr != nil {
			return cu, false
		}
		exprs = append(exprs, e)
	}
	for i, d := range p.devices {
		matches := true
		for _, e := range exprs {
			m, err := e.match(ctx, d)
			if err != nil {
				cu.SelectorErrors++
			}
			if !m {
				matches = false
				break
			}
		}
		if matches {
			cu.Devices++
			if free[i] {
				cu.Free++
			}
		}
	}
	return cu, cu.Devices > 0 || cu.SelectorErrors > 0
}

func hasEffect(taints []resourceapi.DeviceTaint, effect resourceapi.DeviceTaintEffect) bool {
	return slices.ContainsFunc(taints, func(t resourceapi.DeviceTaint) bool { return t.Effect == effect })
}

// capacityExhausted reports whether a shared device has a capacity with
// nothing left, so that no further share fits.
func (s *State) capacityExhausted(d *device) bool {
	used := s.capUsed[d.index]
	if !d.multi || used == nil {
		return false
	}
	for i, c := range d.caps {
		if used[i] >= c.total {
			return true
		}
	}
	return false
}
