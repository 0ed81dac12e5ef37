// Package cel is the CEL environment of device selectors. Validation uses it
// to compile and cost-check selectors when objects are written; the
// allocator uses it to evaluate them against devices.
//
// An expression sees one variable, `device`, with the fields
//
//	device.driver                    string
//	device.attributes[domain][id]    int, bool, string or semver version,
//	                                 or a list of one of these (list attributes)
//	device.capacity[domain][id]      quantity
//	device.allowMultipleAllocations  bool
//
// Attribute and capacity names without a domain belong to the driver's
// domain. Looking up a domain the device has nothing in yields an empty
// map, so `has(device.attributes["other.example.com"].x)` is false rather
// than an error.
package cel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"

	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// Names of the variable and its fields as expressions spell them.
const (
	deviceVar                = "device"
	driverField              = "driver"
	attributesField          = "attributes"
	capacityField            = "capacity"
	allowMultipleAllocsField = "allowMultipleAllocations"
	deviceTypeName           = "kubernetes.DRADevice"
)

// defaultCompileCacheCapacity bounds the shared compile cache. Real
// clusters have a few dozen distinct selectors; the bound only matters
// when something generates unique expressions.
const defaultCompileCacheCapacity = 4096

// Validation remembers fewer and shorter expressions than evaluation: what
// it sees comes straight from users.
const (
	validationCacheCapacity  = 1024
	validationCacheMaxLength = 1024
)

// Declared types of the device variable. The maximum sizes matter: the
// cost estimator multiplies them into the worst case, so they must match
// what validation of ResourceSlices allows.
var (
	// Attribute values are int, bool, string or version; strings and
	// versions are bounded by DeviceAttributeMaxValueLength.
	attributeValueType = withMaxElements(apiservercel.AnyType, resourceapi.DeviceAttributeMaxValueLength)
	// With list attributes (DRAListTypeAttributes) a value may also be a
	// list; dyn lets expressions iterate it (exists, all, in).
	listAttributeValueType = withMaxElements(apiservercel.DynType, resourceapi.DeviceAttributeMaxValueLength)
	domainType             = withMaxElements(apiservercel.StringType, resourceapi.DeviceMaxDomainLength)
	idType                 = withMaxElements(apiservercel.StringType, resourceapi.DeviceMaxIDLength)
	driverType             = withMaxElements(apiservercel.StringType, resourceapi.DriverNameMaxLength)

	attributesByDomainType     = attributesType(attributeValueType)
	listAttributesByDomainType = attributesType(listAttributeValueType)
	capacityByIDType           = apiservercel.NewMapType(idType, apiservercel.QuantityDeclType, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
	capacityByDomainType       = apiservercel.NewMapType(domainType, capacityByIDType, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
)

func attributesType(value *apiservercel.DeclType) *apiservercel.DeclType {
	byID := apiservercel.NewMapType(idType, value, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
	return apiservercel.NewMapType(domainType, byID, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
}

// Compiler compiles device selector expressions. It is safe for concurrent
// use; get the shared one with GetCompiler.
type Compiler struct {
	deviceType *apiservercel.DeclType
	envset     *environment.EnvSet

	cache *compileCache
	// validated holds CompileForValidation's results.
	validated *compileCache
}

var (
	sharedCompilerOnce     sync.Once
	sharedCompiler         *Compiler
	sharedListCompilerOnce sync.Once
	sharedListCompiler     *Compiler
)

// GetCompiler returns the process-wide compiler. Building the environment
// takes tens of milliseconds, so it happens once, on first use. While the
// DRAListTypeAttributes feature gate is on, attribute values are declared
// dyn instead of any, so that expressions can iterate list attributes, as
// upstream's environment does with the gate on.
func GetCompiler() *Compiler {
	if features.Enabled(features.DRAListTypeAttributes) {
		sharedListCompilerOnce.Do(func() {
			sharedListCompiler = newCompiler(defaultCompileCacheCapacity, listAttributesByDomainType)
		})
		return sharedListCompiler
	}
	sharedCompilerOnce.Do(func() {
		sharedCompiler = newCompiler(defaultCompileCacheCapacity, attributesByDomainType)
	})
	return sharedCompiler
}

func newCompiler(cacheCapacity int, attributesType *apiservercel.DeclType) *Compiler {
	field := func(name string, t *apiservercel.DeclType) *apiservercel.DeclField {
		return apiservercel.NewDeclField(name, t, true, nil, nil)
	}
	deviceType := apiservercel.NewObjectType(deviceTypeName, map[string]*apiservercel.DeclField{
		driverField:              field(driverField, driverType),
		attributesField:          field(attributesField, attributesType),
		capacityField:            field(capacityField, capacityByDomainType),
		allowMultipleAllocsField: field(allowMultipleAllocsField, apiservercel.BoolType),
	})

	// The Kubernetes base environment brings the quantity, semver, lists,
	// regex, url, ip/cidr and format libraries; we add the device variable
	// and cel.bind so a domain can be named once per expression.
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	envset, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 31),
		EnvOptions: []cel.EnvOption{
			cel.Variable(deviceVar, deviceType.CelType()),
			ext.Bindings(ext.BindingsVersion(0)),
		},
		DeclTypes: []*apiservercel.DeclType{deviceType},
	})
	if err != nil {
		// Only a programming error in the declarations above gets here.
		panic(fmt.Sprintf("build device selector CEL environment: %v", err))
	}
	return &Compiler{
		deviceType: deviceType,
		envset:     envset,
		cache:      newCompileCache(cacheCapacity),
		validated:  newCompileCache(min(cacheCapacity, validationCacheCapacity)),
	}
}

// Options tune CompileCELExpression. The zero value is what validation of
// new expressions wants.
type Options struct {
	// EnvType picks the environment; nil means StoredExpressions, which
	// accepts every library feature this binary knows. Validation of new or
	// changed expressions passes NewExpressions so that objects stay
	// readable by the previous release.
	EnvType *environment.Type

	// CostLimit overrides the cost limit, both the estimated one checked at
	// compile time and the runtime one. Nil means
	// resourceapi.CELSelectorExpressionMaxCost.
	CostLimit *uint64

	// DisableCostEstimation skips the worst-case cost estimate (and the
	// check against the limit). MaxCost is then math.MaxUint64. Used for
	// expressions that were accepted before, and by the allocator, which
	// relies on the runtime limit.
	DisableCostEstimation bool
}

// CompilationResult is a compiled expression or the reason it does not
// compile. Error is nil exactly when Program can be used.
type CompilationResult struct {
	Program    cel.Program
	Error      *apiservercel.Error
	Expression string
	OutputType *cel.Type

	// MaxCost is the estimated worst-case cost in CEL cost units, or
	// math.MaxUint64 when estimation was disabled or failed.
	MaxCost uint64
}

// Causes of compilation errors that callers may want to tell apart (with
// errors.Is on CompilationResult.Error), e.g. to map them to API error types.
var (
	// ErrTooLong: the expression exceeds CELSelectorExpressionMaxLength.
	ErrTooLong = errors.New("expression too long")
	// ErrTooExpensive: the estimated cost exceeds the limit. It wraps
	// apiservercel.ErrOutOfBudget.
	ErrTooExpensive = fmt.Errorf("estimated cost over limit: %w", apiservercel.ErrOutOfBudget)
)

// CompileCELExpression parses, type-checks and plans an expression. The
// result type must be bool; any/dyn (e.g. a bare attribute lookup) is
// accepted because only evaluation can tell, and a non-bool value then is
// an evaluation error.
func (c *Compiler) CompileCELExpression(expression string, opts Options) CompilationResult {
	fail := func(errType apiservercel.ErrorType, cause error, format string, args ...any) CompilationResult {
		return CompilationResult{
			Error:      &apiservercel.Error{Type: errType, Detail: fmt.Sprintf(format, args...), Cause: cause},
			Expression: expression,
			MaxCost:    math.MaxUint64,
		}
	}

	// Checked before parsing so a huge input costs nothing.
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		return fail(apiservercel.ErrorTypeInvalid, ErrTooLong,
			"expression is %d bytes long, the limit is %d", len(expression), resourceapi.CELSelectorExpressionMaxLength)
	}

	envType := environment.StoredExpressions
	if opts.EnvType != nil {
		envType = *opts.EnvType
	}
	env, err := c.envset.Env(envType)
	if err != nil {
		return fail(apiservercel.ErrorTypeInternal, err, "load CEL environment: %v", err)
	}
	costLimit := uint64(resourceapi.CELSelectorExpressionMaxCost)
	if opts.CostLimit != nil {
		costLimit = *opts.CostLimit
	}

	ast, issues := env.Compile(expression)
	if issues.Err() != nil {
		return fail(apiservercel.ErrorTypeInvalid, apiservercel.ErrCompilation, "compilation failed: %s", issues.String())
	}
	// Attribute values are declared as any, so a bare attribute lookup has
	// that type; it is accepted here and checked when evaluated.
	if out := ast.OutputType(); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.AnyType) && !out.IsExactType(cel.DynType) {
		return fail(apiservercel.ErrorTypeInvalid, apiservercel.ErrCompilation,
			"must evaluate to bool, not %s", out.String())
	}

	program, err := env.Program(ast,
		// The base environment sets the admission-policy limit; selectors
		// have their own.
		cel.CostLimit(costLimit),
		cel.InterruptCheckFrequency(celconfig.CheckFrequency),
	)
	if err != nil {
		return fail(apiservercel.ErrorTypeInternal, err, "program instantiation failed: %v", err)
	}

	result := CompilationResult{
		Program:    program,
		Expression: expression,
		OutputType: ast.OutputType(),
		MaxCost:    math.MaxUint64,
	}
	if opts.DisableCostEstimation {
		return result
	}

	estimate, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: &deviceSizeEstimator{deviceType: c.deviceType}})
	if err != nil {
		result.Program = nil
		result.Error = &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: "cost estimation failed: " + err.Error(), Cause: err}
		return result
	}
	result.MaxCost = estimate.Max
	if estimate.Max > costLimit {
		result.Program = nil
		result.Error = &apiservercel.Error{
			Type: apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("too complex: estimated worst-case cost %d exceeds the device selector cost limit of %d; "+
				"reduce the number of nested iterations over lists or strings", estimate.Max, costLimit),
			Cause: ErrTooExpensive,
		}
	}
	return result
}

// CompileCached compiles for evaluation and remembers the result, so the
// allocator pays for each distinct expression once. It skips the cost
// estimate (stored expressions passed it when they were written, and
// evaluation enforces the runtime limit). Failed compilations are cached
// too: they fail the same way every time.
func (c *Compiler) CompileCached(expression string) CompilationResult {
	if result, ok := c.cache.get(expression); ok {
		return result
	}
	result := c.CompileCELExpression(expression, Options{DisableCostEstimation: true})
	c.cache.add(expression, result)
	return result
}

// CompileForValidation compiles a new or changed expression as validation
// does (the NewExpressions environment, the cost estimated against the
// limit) and remembers the result, failures included. Every claim made
// from one template carries the same selectors, and compiling one was a
// large share of the server's CPU per claim create. Expressions longer
// than validationCacheMaxLength are compiled every time, so that distinct
// large expressions cannot fill the memory.
func (c *Compiler) CompileForValidation(expression string) CompilationResult {
	if len(expression) > validationCacheMaxLength {
		return c.compileForValidation(expression)
	}
	if result, ok := c.validated.get(expression); ok {
		return result
	}
	result := c.compileForValidation(expression)
	c.validated.add(expression, result)
	return result
}

func (c *Compiler) compileForValidation(expression string) CompilationResult {
	envType := environment.NewExpressions
	return c.CompileCELExpression(expression, Options{EnvType: &envType})
}

// DeviceMatches evaluates the expression for one device. The runtime cost
// limit is the one the expression was compiled with
// (CELSelectorExpressionMaxCost by default); exceeding it is an error.
// Evaluating several expressions against the same device is cheaper with
// NewDeviceInput and DeviceInputMatches.
func (r CompilationResult) DeviceMatches(ctx context.Context, d Device) (bool, *cel.EvalDetails, error) {
	input, err := NewDeviceInput(d)
	if err != nil {
		return false, nil, err
	}
	return r.DeviceInputMatches(ctx, input)
}

// DeviceInputMatches is DeviceMatches for a device already converted into
// CEL values.
func (r CompilationResult) DeviceInputMatches(ctx context.Context, input *DeviceInput) (bool, *cel.EvalDetails, error) {
	if r.Error != nil {
		return false, nil, r.Error
	}
	if r.Program == nil {
		return false, nil, errors.New("expression was not compiled")
	}
	value, details, err := r.Program.ContextEval(ctx, input)
	if err != nil {
		return false, details, err
	}
	matches, ok := value.(types.Bool)
	if !ok {
		return false, details, fmt.Errorf("expression must evaluate to bool, got %s", value.Type().TypeName())
	}
	return bool(matches), details, nil
}

func withMaxElements(t *apiservercel.DeclType, maxElements int64) *apiservercel.DeclType {
	out := *t
	out.MaxElements = maxElements
	return &out
}

// deviceSizeEstimator tells the cost estimator how large the maps and
// strings reachable from `device` can get. Without it every
// `device.attributes[d][id]` string would count as unbounded.
type deviceSizeEstimator struct {
	deviceType *apiservercel.DeclType
}

func (e *deviceSizeEstimator) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	path := node.Path()
	if len(path) == 0 || path[0] != deviceVar {
		return nil
	}
	current := e.deviceType
	for _, step := range path[1:] {
		switch step {
		case "@items", "@values":
			current = current.ElemType
		case "@keys":
			current = current.KeyType
		default:
			if f, ok := current.Fields[step]; ok {
				current = f.Type
			} else if current.IsMap() {
				// A map indexed with a constant key, e.g.
				// device.attributes["dra.example.com"]: every value has
				// the element type's bound, whatever the key.
				current = current.ElemType
			} else {
				return nil
			}
		}
		if current == nil {
			return nil
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(current.MaxElements)}
}

func (e *deviceSizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}
