package driver

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
)

// How Run repairs: the informer's events are compared with the
// resourceVersions the last pass left (known). The publisher's own writes
// come back with the resourceVersions their answers carried and are
// passed over; anything else (a slice deleted, edited, or one in the
// publisher's scope that it did not write) marks the slice changed and
// asks for a check after the repair delay. The check looks at the
// changed slices in the informer's cache and makes a pass, which lists
// the slices from the API and writes only what differs from the desired
// pools, if one of them is not as the last pass left it. An event that
// raced with the pass that wrote it costs a check, never a write.

// passState collects, during a pass, the resourceVersions of the managed
// slices as the pass leaves them.
type passState struct {
	mu sync.Mutex
	rv map[string]string
}

func (s *passState) set(name, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv[name] = rv
}

func (s *passState) drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rv, name)
}

// setKnown makes what a pass left the state events are compared with.
func (p *Publisher) setKnown(state *passState) {
	state.mu.Lock()
	defer state.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.known = state.rv
}

// watch sets up the informer and its event handler.
func (p *Publisher) watch() error {
	p.informer = p.opts.SliceInformer
	if p.informer == nil {
		selector := fields.Set{resourceapi.ResourceSliceSelectorDriver: p.opts.DriverName}
		if p.opts.NodeName != "" {
			selector[resourceapi.ResourceSliceSelectorNodeName] = p.opts.NodeName
		}
		p.informer = resourceinformers.NewFilteredResourceSliceInformer(p.client, 0, cache.Indexers{}, func(opts *metav1.ListOptions) {
			opts.FieldSelector = selector.AsSelector().String()
		})
		p.ownInformer = true
	}
	_, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.observe(obj, false) },
		UpdateFunc: func(_, obj any) { p.observe(obj, false) },
		DeleteFunc: func(obj any) { p.observe(obj, true) },
	})
	return err
}

// observe marks a slice changed when an event shows it other than the
// last pass left it, and asks for a check.
func (p *Publisher) observe(obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	slice, ok := obj.(*resourcev1.ResourceSlice)
	if !ok || slice.Spec.Driver != p.opts.DriverName {
		return
	}
	if p.opts.NodeName != "" && ptr.Deref(slice.Spec.NodeName, "") != p.opts.NodeName {
		return
	}
	p.mu.Lock()
	rv, known := p.known[slice.Name]
	switch {
	case !known && !p.manages(slice, p.pools):
		// Not the publisher's: another node agent's slice of the driver.
	case !deleted && known && rv == slice.ResourceVersion:
		// As the last pass left it: the echo of its own write.
	default:
		// A delete is checked even for a slice the last pass did not
		// know: a pass that listed it may still be running.
		p.changed[slice.Name] = true
		delay := p.repairDelay()
		p.mu.Unlock()
		p.queue.AddAfter(checkKey, delay)
		return
	}
	p.mu.Unlock()
}

// differs says whether a slice that events showed changed is not as the
// last pass left it, as far as the informer's cache knows.
func (p *Publisher) differs() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := p.changed
	p.changed = map[string]bool{}
	for name := range changed {
		rv, known := p.known[name]
		obj, exists, err := p.informer.GetStore().GetByKey(name)
		if err != nil {
			return true
		}
		slice, _ := obj.(*resourcev1.ResourceSlice)
		switch {
		case exists && slice == nil:
			return true
		case exists && known && slice.ResourceVersion == rv:
			// The echo of the pass's own write, seen before the pass
			// recorded it.
		case !exists && !known:
			// Deleted by the publisher itself.
		case exists && !known && !p.manages(slice, p.pools):
		default:
			return true
		}
	}
	return false
}

// repairDelay is how long the next repair waits: Options.RepairDelay,
// doubled for each repair in a row before it that wrote, up to
// MaxRepairDelay. p.mu is held.
func (p *Publisher) repairDelay() time.Duration {
	if !p.inARow() {
		return p.opts.RepairDelay
	}
	return min(p.opts.RepairDelay<<min(p.repairs, 16), MaxRepairDelay)
}

// inARow says whether a repair now follows the last one closely: within
// twice the delay it would wait (at least a few seconds), which someone
// who undoes every repair at once does, and a person editing slices by
// hand does not. p.mu is held.
func (p *Publisher) inARow() bool {
	if p.repairs == 0 {
		return false
	}
	window := max(2*min(p.opts.RepairDelay<<min(p.repairs, 16), MaxRepairDelay), 2*time.Second)
	return time.Since(p.lastRepair) <= window
}

// noteRepair records a check that led to writes (wrote) or not.
func (p *Publisher) noteRepair(wrote bool) {
	if !wrote {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inARow() {
		p.repairs = 0
	}
	p.repairs++
	p.lastRepair = time.Now()
}

// resync asks for a pass every Options.ResyncPeriod until ctx ends.
func (p *Publisher) resync(ctx context.Context) {
	ticker := time.NewTicker(p.opts.ResyncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			p.request()
		}
	}
}

func (p *Publisher) lastGeneration(pool string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.generations[pool]
}

func (p *Publisher) setGeneration(pool string, generation int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.generations[pool] = generation
}
