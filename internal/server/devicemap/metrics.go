package devicemap

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	pendingPods = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "draplane",
		Subsystem:      "devicemap",
		Name:           "pending_pods",
		Help:           "Pods with PodScheduled=False, by the condition's reason, as the device map shows them.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	updatesSent = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "draplane",
		Subsystem:      "devicemap",
		Name:           "updates_total",
		Help:           "Updates the device map computed and sent to its pages.",
		StabilityLevel: metrics.ALPHA,
	})

	registerMetrics sync.Once
)

// RegisterMetrics registers the device map's metrics once.
func RegisterMetrics() {
	registerMetrics.Do(func() { legacyregistry.MustRegister(pendingPods, updatesSent) })
}

// setPendingMetricLocked sets the pending pods gauge per reason.
func (m *Map) setPendingMetricLocked() {
	byReason := map[string]int{}
	for _, p := range m.pending {
		byReason[p.Reason]++
	}
	for reason := range m.reasons {
		if byReason[reason] == 0 {
			pendingPods.WithLabelValues(reason).Set(0)
		}
	}
	for reason, n := range byReason {
		m.reasons[reason] = struct{}{}
		pendingPods.WithLabelValues(reason).Set(float64(n))
	}
}
