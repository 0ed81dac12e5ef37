package podclaims

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodsByClaimIndex maps "<namespace>/<claim name>" to the pods that use
// that claim, as far as the pod knows the claim's name. Every controller
// that asks it shares the one index of a shared pod informer (added by
// AddPodsByClaimIndex), so the informer computes it once per pod event.
const PodsByClaimIndex = "pods-by-claim"

// addIndexMutex makes "is the index there, else add it" one step for
// controllers built concurrently on one informer.
var addIndexMutex sync.Mutex

// AddPodsByClaimIndex adds PodsByClaimIndex to the pod informer unless it
// has it already.
func AddPodsByClaimIndex(informer cache.SharedIndexInformer) error {
	return addIndexOnce(informer, PodsByClaimIndex, PodsByClaimIndexFunc)
}

// addIndexOnce adds the index to the informer unless it has it already.
func addIndexOnce(informer cache.SharedIndexInformer, name string, index cache.IndexFunc) error {
	addIndexMutex.Lock()
	defer addIndexMutex.Unlock()
	if _, ok := informer.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{name: index})
}

// PodsByClaimIndexFunc indexes pods by the claims they use whose names
// are known.
func PodsByClaimIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, podClaim := range ClaimsOf(pod) {
		name, _, err := ClaimName(pod, podClaim)
		if err != nil || name == nil {
			// Not generated yet or not needed: nothing to index.
			continue
		}
		keys = append(keys, pod.Namespace+"/"+*name)
	}
	return keys, nil
}
