package allocation

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// ownWrites remembers which claim updates this controller made on behalf
// of which pod, so that their watch events do not queue that pod again.
// A pod whose attempt wrote a claim and then failed would otherwise be
// retried at once by the echo of its own write (the allocation, or the
// rollback of it), bypassing its backoff: a write loop.
//
// While a write is in flight its resourceVersion is not known yet, and
// its event may arrive before the response: every event of the claim
// counts as the writer's own then. Afterwards, the event with the
// resourceVersion the write returned does.
type ownWrites struct {
	mutex  sync.Mutex
	claims map[types.UID]*ownWrite
}

type ownWrite struct {
	// pod is the key of the pod the writes were for.
	pod      string
	inFlight int
	// versions are resourceVersions written and not observed yet.
	versions map[string]struct{}
}

func newOwnWrites() *ownWrites {
	return &ownWrites{claims: make(map[types.UID]*ownWrite)}
}

// begin announces a write of the claim for the pod.
func (o *ownWrites) begin(claim types.UID, pod string) {
	o.mutex.Lock()
	defer o.mutex.Unlock()
	w := o.claims[claim]
	if w == nil || w.pod != pod {
		// The claim is written for another pod now: the earlier
		// echoes are of no interest any more.
		w = &ownWrite{pod: pod, versions: map[string]struct{}{}}
		o.claims[claim] = w
	}
	w.inFlight++
}

// end records the outcome of a write that begin announced: the
// resourceVersion it produced, "" when it failed.
func (o *ownWrites) end(claim types.UID, resourceVersion string) {
	o.mutex.Lock()
	defer o.mutex.Unlock()
	w := o.claims[claim]
	if w == nil {
		return
	}
	if w.inFlight > 0 {
		w.inFlight--
	}
	if resourceVersion != "" {
		w.versions[resourceVersion] = struct{}{}
	}
	if w.inFlight == 0 && len(w.versions) == 0 {
		delete(o.claims, claim)
	}
}

// observe is called for each event of a claim. It returns the key of
// the pod whose write caused it, or "" for a change made by someone else.
func (o *ownWrites) observe(claim types.UID, resourceVersion string, deleted bool) string {
	o.mutex.Lock()
	defer o.mutex.Unlock()
	w := o.claims[claim]
	if w == nil {
		return ""
	}
	if deleted {
		delete(o.claims, claim)
		return ""
	}
	_, own := w.versions[resourceVersion]
	delete(w.versions, resourceVersion)
	// Versions older than this one will not be seen any more (a relist
	// skips them): forget them.
	if observed, err := strconv.ParseUint(resourceVersion, 10, 64); err == nil {
		for version := range w.versions {
			if v, err := strconv.ParseUint(version, 10, 64); err == nil && v < observed {
				delete(w.versions, version)
			}
		}
	}
	pod := w.pod
	if w.inFlight == 0 && len(w.versions) == 0 {
		delete(o.claims, claim)
	}
	if own || w.inFlight > 0 {
		return pod
	}
	return ""
}
