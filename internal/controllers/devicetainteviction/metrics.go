package devicetainteviction

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	metricsNamespace = "draplane"
	metricsSubsystem = "devicetainteviction_controller"
)

var (
	podsEvicted = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "pods_evicted_total",
		Help:           "Number of pods deleted because a device they use has a NoExecute taint they do not tolerate, by where the taint comes from (rule, slice).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"source"})

	evictionsCancelled = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "evictions_cancelled_total",
		Help:           "Number of pending pod evictions cancelled because the taint went away or became tolerated in time.",
		StabilityLevel: metrics.ALPHA,
	})

	evictionLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "pod_eviction_latency_seconds",
		Help:           "Time from when a pod's eviction became due (taint added plus tolerationSeconds) to its deletion; includes waiting for the rate limit.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})

	registerMetrics sync.Once
)

func setupMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(podsEvicted, evictionsCancelled, evictionLatency)
	})
}
