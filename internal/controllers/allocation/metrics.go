package allocation

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	metricsNamespace = "draplane"
	metricsSubsystem = "allocation_controller"

	// Results of one attempt to place a pod or allocate its claims.
	resultPlaced        = "placed"
	resultAllocated     = "allocated" // pod with spec.nodeName preset
	resultUnschedulable = "unschedulable"
	resultError         = "error"
)

var (
	podsPlaced = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "pods_placed_total",
		Help:           "Number of pods that the controller bound to a node after allocating their claims.",
		StabilityLevel: metrics.ALPHA,
	})

	allocationAttempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "attempts_total",
		Help:           "Number of attempts to allocate the claims of a pod, by result (placed, allocated, unschedulable, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	podBindingLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "pod_creation_to_binding_seconds",
		Help:           "Time from pod creation to its binding by the controller.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})

	bindingOutcomes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "binding_conditions_total",
		Help:           "Number of waits for the binding conditions of a pod's devices, by outcome (met, failed, timed out).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})

	registerMetrics sync.Once
)

func setupMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(podsPlaced, allocationAttempts, podBindingLatency, bindingOutcomes)
	})
}
