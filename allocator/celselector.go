package allocator

import (
	"context"
	"sync"

	"github.com/draplane/draplane/cel"
)

// preparedInput holds a device converted for CEL once, shared by all
// expressions evaluated against that device.
type preparedInput struct {
	once  sync.Once
	input *cel.DeviceInput
	err   error
}

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

func (p celProgram) Matches(ctx context.Context, d SelectorDevice) (bool, error) {
	if d.prepared != nil {
		d.prepared.once.Do(func() {
			d.prepared.input, d.prepared.err = cel.NewDeviceInput(celDevice(d))
		})
		input, err := d.prepared.input, d.prepared.err
		if err != nil {
			return false, err
		}
		matches, _, err := p.result.DeviceInputMatches(ctx, input)
		return matches, err
	}
	matches, _, err := p.result.DeviceMatches(ctx, celDevice(d))
	return matches, err
}

func celDevice(d SelectorDevice) cel.Device {
	return cel.Device{Driver: d.Driver, Attributes: d.Attributes, Capacity: d.Capacity, AllowMultipleAllocations: d.AllowMultipleAllocations}
}
