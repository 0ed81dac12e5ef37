package resourceclaim

import (
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

const (
	metricsNamespace = "draplane"
	metricsSubsystem = "resourceclaim_controller"

	createSuccess = "success"
	createFailure = "failure"
)

var (
	// claimCreates counts attempts to create a claim from a template.
	claimCreates = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      metricsNamespace,
		Subsystem:      metricsSubsystem,
		Name:           "creates_total",
		Help:           "Number of ResourceClaims that the controller tried to create from a template, by result (success, failure).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"status"})

	claimsDesc = metrics.NewDesc(
		metrics.BuildFQName(metricsNamespace, metricsSubsystem, "resource_claims"),
		"Number of ResourceClaims in the informer cache, by whether they are allocated, reserved for a consumer and generated for a pod.",
		[]string{"allocated", "reserved", "generated"}, nil,
		metrics.ALPHA, "",
	)

	// currentClaimLister is what the claims collector counts. The latest
	// controller wins: after a leader election hand-over, a new
	// controller with new informers replaces the old one.
	currentClaimLister atomic.Pointer[resourcelisters.ResourceClaimLister]

	registerMetrics sync.Once
)

// claimsCollector counts claims by state when scraped, straight from the
// informer cache, so the numbers cannot drift from what is stored.
type claimsCollector struct {
	metrics.BaseStableCollector
}

var _ metrics.StableCollector = &claimsCollector{}

func (c *claimsCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- claimsDesc
}

func (c *claimsCollector) CollectWithStability(ch chan<- metrics.Metric) {
	lister := currentClaimLister.Load()
	if lister == nil {
		return
	}
	claims, err := (*lister).List(labels.Everything())
	if err != nil {
		return
	}
	type state struct{ allocated, reserved, generated bool }
	counts := make(map[state]int)
	for _, claim := range claims {
		podName, _ := podclaims.OwningPod(claim)
		counts[state{
			allocated: claim.Status.Allocation != nil,
			reserved:  len(claim.Status.ReservedFor) > 0,
			generated: podName != "",
		}]++
	}
	for s, count := range counts {
		ch <- metrics.NewLazyConstMetric(claimsDesc, metrics.GaugeValue, float64(count),
			strconv.FormatBool(s.allocated), strconv.FormatBool(s.reserved), strconv.FormatBool(s.generated))
	}
}

func setupMetrics(lister resourcelisters.ResourceClaimLister) {
	currentClaimLister.Store(&lister)
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(claimCreates)
		legacyregistry.CustomMustRegister(&claimsCollector{})
	})
}
