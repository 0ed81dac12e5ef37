package allocator

import (
	"context"

	"github.com/draplane/draplane/internal/cel"
)

// celCompiler is the default SelectorCompiler: the device selector CEL
// environment with its runtime cost limit.
type celCompiler struct {
	compiler *cel.Compiler
}

func (c celCompiler) Compile(expression string) (SelectorProgram, error) {
	result := c.compiler.CompileCached(expression)
	if result.Error != nil {
		return nil, result.Error
	}
	return celProgram{result: result}, nil
}

type celProgram struct {
	result cel.CompilationResult
}

// Matches converts the device for CEL for this one evaluation. The
// Inventory remembers each expression's result per device, so a device
// is converted once per expression; keeping the converted form for the
// next expression held kilobytes per device for as long as the inventory
// lived (once in the allocation controller and again in the resourcepools
// view).
func (p celProgram) Matches(ctx context.Context, d SelectorDevice) (bool, error) {
	matches, _, err := p.result.DeviceMatches(ctx, celDevice(d))
	return matches, err
}

func celDevice(d SelectorDevice) cel.Device {
	return cel.Device{Driver: d.Driver, Attributes: d.Attributes, Capacity: d.Capacity, AllowMultipleAllocations: d.AllowMultipleAllocations}
}
