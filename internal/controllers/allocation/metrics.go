package allocation

import (
	"sync"
	"sync/atomic"

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

	nominationsDesc = metrics.NewDesc(
		metrics.BuildFQName(metricsNamespace, metricsSubsystem, "nominations"),
		"Number of pods holding a nomination: devices on a node kept for a preemptor (or a gang member) while its victims go. Absent while the controller does not run.",
		nil, nil, metrics.ALPHA, "",
	)

	// runningState is the placement state of the controller that runs
	// now, counted by the nominations collector: after a leader election
	// hand-over, the new term's controller replaces the old one, and a
	// stopped one is taken out.
	runningState atomic.Pointer[placementState]

	registerMetrics sync.Once
)

// nominationsCollector counts the running controller's nominations when
// scraped: a nomination left behind by a pod that is gone shows.
type nominationsCollector struct {
	metrics.BaseStableCollector
}

func (c *nominationsCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- nominationsDesc
}

func (c *nominationsCollector) CollectWithStability(ch chan<- metrics.Metric) {
	s := runningState.Load()
	if s == nil {
		return
	}
	ch <- metrics.NewLazyConstMetric(nominationsDesc, metrics.GaugeValue, float64(s.nominationCount()))
}

func setupMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(podsPlaced, allocationAttempts, podBindingLatency, bindingOutcomes)
		legacyregistry.CustomMustRegister(&nominationsCollector{})
	})
}
