package resourcepool

import (
	"sync"
	"sync/atomic"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The gauges carry the numbers of the resourcepools resource, read from
// the tracker at scrape time.
var (
	poolDevicesDesc = metrics.NewDesc("draplane_resourcepool_devices",
		"Devices of a resource pool by state: total, allocated, admin_access (allocations), tainted, tainted_noschedule, tainted_noexecute, unusable, free.",
		[]string{"driver", "pool", "node", "state"}, nil, metrics.ALPHA, "")
	poolCounterDesc = metrics.NewDesc("draplane_resourcepool_counter",
		"Shared counters of a resource pool: used and total per counter set and counter.",
		[]string{"driver", "pool", "counter_set", "counter", "kind"}, nil, metrics.ALPHA, "")
	poolCapacityDesc = metrics.NewDesc("draplane_resourcepool_capacity",
		"Consumable capacity of a resource pool's shareable devices: used and total per capacity.",
		[]string{"driver", "pool", "capacity", "kind"}, nil, metrics.ALPHA, "")
	recountsDesc = metrics.NewDesc("draplane_resourcepool_recounts_total",
		"Times a single pool was counted again after an event; an event touching one pool counts one.",
		nil, nil, metrics.ALPHA, "")
	classDevicesDesc = metrics.NewDesc("draplane_deviceclass_devices",
		"Devices a DeviceClass selects in all pools: total and free.",
		[]string{"class", "state"}, nil, metrics.ALPHA, "")
)

type collector struct {
	metrics.BaseStableCollector
}

// current is the storage whose tracker the gauges show: the newest one
// made, as there is one per server and one server per process outside of
// tests.
var (
	current      atomic.Pointer[REST]
	registerOnce sync.Once
)

// RegisterMetrics makes /metrics show this storage's pools.
func (r *REST) RegisterMetrics() {
	current.Store(r)
	registerOnce.Do(func() { legacyregistry.CustomMustRegister(&collector{}) })
}

func (c *collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- poolDevicesDesc
	ch <- poolCounterDesc
	ch <- poolCapacityDesc
	ch <- classDevicesDesc
	ch <- recountsDesc
}

func (c *collector) CollectWithStability(ch chan<- metrics.Metric) {
	r := current.Load()
	if r == nil {
		return
	}
	ch <- metrics.NewLazyConstMetric(recountsDesc, metrics.CounterValue, float64(r.tracker.Recomputes()))
	pools, _ := r.tracker.Pools()
	for _, u := range pools {
		node := u.NodeName
		for _, s := range []struct {
			state string
			n     int
		}{
			{"total", u.Devices}, {"allocated", u.Allocated}, {"admin_access", u.AdminAccess}, {"tainted", u.Tainted},
			{"tainted_noschedule", u.TaintedNoSchedule}, {"tainted_noexecute", u.TaintedNoExecute},
			{"unusable", u.Unusable}, {"free", u.Free},
		} {
			ch <- metrics.NewLazyConstMetric(poolDevicesDesc, metrics.GaugeValue, float64(s.n), u.ID.Driver, u.ID.Pool, node, s.state)
		}
		for _, cu := range u.Counters {
			ch <- metrics.NewLazyConstMetric(poolCounterDesc, metrics.GaugeValue, cu.Used.AsApproximateFloat64(), u.ID.Driver, u.ID.Pool, cu.CounterSet, cu.Counter, "used")
			ch <- metrics.NewLazyConstMetric(poolCounterDesc, metrics.GaugeValue, cu.Total.AsApproximateFloat64(), u.ID.Driver, u.ID.Pool, cu.CounterSet, cu.Counter, "total")
		}
		for _, cu := range u.Capacities {
			ch <- metrics.NewLazyConstMetric(poolCapacityDesc, metrics.GaugeValue, cu.Used.AsApproximateFloat64(), u.ID.Driver, u.ID.Pool, string(cu.Name), "used")
			ch <- metrics.NewLazyConstMetric(poolCapacityDesc, metrics.GaugeValue, cu.Total.AsApproximateFloat64(), u.ID.Driver, u.ID.Pool, string(cu.Name), "total")
		}
	}
	for name, ct := range r.tracker.Classes() {
		ch <- metrics.NewLazyConstMetric(classDevicesDesc, metrics.GaugeValue, float64(ct.Devices), name, "total")
		ch <- metrics.NewLazyConstMetric(classDevicesDesc, metrics.GaugeValue, float64(ct.Free), name, "free")
	}
}
