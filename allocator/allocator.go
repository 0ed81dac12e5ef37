// Package allocator decides which devices satisfy a pod's ResourceClaims on
// a node. It is a pure library: the caller hands in device classes,
// ResourceSlices, what is already in use, the claims and a node, and gets
// back AllocationResults or an explanation of why the claims don't fit.
//
// The work is split so that repeated calls are cheap: Prepare groups slices
// into pools once (again when slices, classes or taint rules change),
// Inventory.State folds in the devices in use once (State.AddAllocation
// adds what a round allocates, State.Refresh follows changes of the
// accounting per claim), and per node the device list and per device the
// result of every selector expression are computed once and cached.
// Allocate answers for one node, SelectNode chooses among nodes and
// explains every node that does not fit, ChooseNode makes the same choice
// without searching the nodes that cannot be chosen.
//
// Semantics follow the structured allocator of Kubernetes 1.37; the
// package's tests compare against an exhaustive search, and
// testdata/upstream against the upstream allocator itself.
package allocator

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/draplane/draplane/internal/cel"
)

// Policy chooses among nodes that all fit.
type Policy int

const (
	// MostAllocated prefers nodes whose devices are already the most used,
	// packing pods tightly and keeping other nodes free.
	MostAllocated Policy = iota
	// LeastAllocated spreads pods over the least used nodes.
	LeastAllocated
)

// Options configure an Allocator.
type Options struct {
	Policy Policy
	// Selectors compiles selector expressions. The default is the device
	// CEL environment of package cel; tests substitute simpler languages.
	Selectors SelectorCompiler
	// NewShareID generates the share IDs of allocations of devices that
	// allow multiple allocations. Defaults to random UIDs; tests set it to
	// get stable output.
	NewShareID func() types.UID
}

// Allocator allocates devices. It holds no cluster state and is safe for
// concurrent use.
type Allocator struct {
	policy     Policy
	compiler   SelectorCompiler
	newShareID func() types.UID
}

// New returns an Allocator.
func New(opts Options) *Allocator {
	a := &Allocator{policy: opts.Policy, compiler: opts.Selectors, newShareID: opts.NewShareID}
	if a.compiler == nil {
		a.compiler = celCompiler{compiler: cel.GetCompiler()}
	}
	if a.newShareID == nil {
		a.newShareID = uuid.NewUUID
	}
	return a
}
