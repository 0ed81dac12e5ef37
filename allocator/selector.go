package allocator

import (
	"context"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// SelectorDevice is what a selector expression sees of a device. It mirrors
// the device type of the CEL environment in package cel so the allocator
// can be tested with other matchers.
type SelectorDevice struct {
	Driver                   string
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	AllowMultipleAllocations *bool
}

// SelectorProgram is one compiled selector expression.
type SelectorProgram interface {
	// Matches evaluates the expression for one device. An error means the
	// device does not match; it is reported in explanations.
	Matches(ctx context.Context, device SelectorDevice) (bool, error)
}

// SelectorCompiler compiles selector expressions. Implementations must be
// safe for concurrent use; the allocator caches what they return per
// Snapshot, so they need not cache themselves.
type SelectorCompiler interface {
	Compile(expression string) (SelectorProgram, error)
}
