package resourceclaim

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
)

func TestClaimsCollector(t *testing.T) {
	pod := makePod("pod-a", "uid-a")
	claims := []*resourcev1.ResourceClaim{
		makeClaim("pending"),
		makeClaim("allocated", allocated()),
		makeClaim("in-use", allocated(), reservedFor(pod)),
		makeClaim("in-use-too", allocated(), reservedFor(pod)),
		makeClaim("generated", generatedFor(pod, "gpu"), allocated(), reservedFor(pod)),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, claim := range claims {
		mustAdd(t, indexer, claim)
	}
	setupMetrics(resourcelisters.NewResourceClaimLister(indexer))

	expected := `
# HELP draplane_resourceclaim_controller_resource_claims [ALPHA] Number of ResourceClaims in the informer cache, by whether they are allocated, reserved for a consumer and generated for a pod.
# TYPE draplane_resourceclaim_controller_resource_claims gauge
draplane_resourceclaim_controller_resource_claims{allocated="false",generated="false",reserved="false"} 1
draplane_resourceclaim_controller_resource_claims{allocated="true",generated="false",reserved="false"} 1
draplane_resourceclaim_controller_resource_claims{allocated="true",generated="false",reserved="true"} 2
draplane_resourceclaim_controller_resource_claims{allocated="true",generated="true",reserved="true"} 1
`
	if err := testutil.CustomCollectAndCompare(&claimsCollector{}, strings.NewReader(expected), "draplane_resourceclaim_controller_resource_claims"); err != nil {
		t.Error(err)
	}
}
