package cel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

const testDriver = "dra.example.com"

// testDevice has one attribute of every value type, both unqualified (so
// in the driver's domain) and in a foreign domain, plus capacities.
func testDevice() Device {
	return Device{
		Driver: testDriver,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"model":                       {StringValue: ptr.To("a100")},
			"cores":                       {IntValue: ptr.To[int64](108)},
			"healthy":                     {BoolValue: ptr.To(true)},
			"driverVersion":               {VersionValue: ptr.To("1.2.3")},
			"numa.example.com/node":       {IntValue: ptr.To[int64](1)},
			testDriver + "/qualifiedName": {StringValue: ptr.To("same domain")},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory":              {Value: resource.MustParse("40Gi")},
			"other.example.com/x": {Value: resource.MustParse("2")},
		},
	}
}

// listDevice has one list attribute of every value type.
func listDevice() *Device {
	return &Device{
		Driver: testDriver,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"cores":    {IntValues: []int64{0, 1, 2}},
			"flags":    {BoolValues: []bool{true, false}},
			"models":   {StringValues: []string{"a100", "h100"}},
			"firmware": {VersionValues: []string{"1.0.0", "2.0.0"}},
		},
	}
}

// bigList renders a CEL list literal of n ints.
func bigList(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// bigStringList renders a CEL list literal of n distinct strings.
func bigStringList(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprintf("item-%d", i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

func TestCompileAndMatch(t *testing.T) {
	tests := []struct {
		name       string
		expression string
		opts       Options
		device     *Device // default testDevice()

		// compileErr is a substring of the compile error; empty means it must compile.
		compileErr  string
		compileType apiservercel.ErrorType
		compileIs   error

		want    bool
		evalErr string // substring of the evaluation error

		// listAttributes turns DRAListTypeAttributes on.
		listAttributes bool
	}{
		{name: "literal true", expression: "true", want: true},
		{name: "driver", expression: `device.driver == "dra.example.com"`, want: true},
		{name: "driver mismatch", expression: `device.driver == "other"`, want: false},
		{name: "string attribute", expression: `device.attributes["dra.example.com"].model == "a100"`, want: true},
		{name: "int attribute", expression: `device.attributes["dra.example.com"].cores > 100`, want: true},
		{name: "bool attribute as result", expression: `device.attributes["dra.example.com"].healthy`, want: true},
		{
			name:       "unqualified and qualified names share the driver domain",
			expression: `device.attributes["dra.example.com"].qualifiedName == "same domain" && "model" in device.attributes["dra.example.com"]`,
			want:       true,
		},
		{name: "foreign domain", expression: `device.attributes["numa.example.com"].node == 1`, want: true},
		{name: "unknown domain is empty map", expression: `!has(device.attributes["nowhere.example.com"].x)`, want: true},
		{name: "has on known attribute", expression: `has(device.attributes["dra.example.com"].model)`, want: true},
		{name: "cel.bind", expression: `cel.bind(dra, device.attributes["dra.example.com"], dra.cores == 108 && dra.healthy)`, want: true},
		{name: "semver greater", expression: `device.attributes["dra.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))`, want: true},
		{name: "semver less", expression: `device.attributes["dra.example.com"].driverVersion.isLessThan(semver("1.0.0"))`, want: false},
		{name: "semver equal", expression: `device.attributes["dra.example.com"].driverVersion == semver("1.2.3")`, want: true},
		{name: "quantity compare", expression: `device.capacity["dra.example.com"].memory.compareTo(quantity("32Gi")) > 0`, want: true},
		{name: "quantity less", expression: `device.capacity["dra.example.com"].memory.isLessThan(quantity("1Ti"))`, want: true},
		{name: "quantity other domain", expression: `device.capacity["other.example.com"].x == quantity("2")`, want: true},
		{name: "allowMultipleAllocations default false", expression: `device.allowMultipleAllocations`, want: false},
		{
			name:       "allowMultipleAllocations true",
			expression: `device.allowMultipleAllocations`,
			device:     &Device{Driver: testDriver, AllowMultipleAllocations: ptr.To(true)},
			want:       true,
		},

		{name: "int list attribute", expression: `2 in device.attributes["dra.example.com"].cores && size(device.attributes["dra.example.com"].cores) == 3`, device: listDevice(), listAttributes: true, want: true},
		{name: "bool list attribute", expression: `device.attributes["dra.example.com"].flags.all(f, f)`, device: listDevice(), listAttributes: true, want: false},
		{name: "string list attribute", expression: `device.attributes["dra.example.com"].models.exists(m, m.startsWith("h1"))`, device: listDevice(), listAttributes: true, want: true},
		{name: "version list attribute", expression: `device.attributes["dra.example.com"].firmware.exists(v, v.isGreaterThan(semver("1.5.0")))`, device: listDevice(), listAttributes: true, want: true},
		{name: "scalar attributes with the list environment", expression: `device.attributes["dra.example.com"].cores > 100`, listAttributes: true, want: true},
		{
			name:        "list iteration needs DRAListTypeAttributes",
			expression:  `device.attributes["dra.example.com"].models.exists(m, m == "h100")`,
			compileErr:  "cannot be range of a comprehension",
			compileType: apiservercel.ErrorTypeInvalid,
		},

		{name: "syntax error", expression: `device.driver ==`, compileErr: "Syntax error", compileType: apiservercel.ErrorTypeInvalid, compileIs: apiservercel.ErrCompilation},
		{name: "type error", expression: `device.driver + 1 == 2`, compileErr: "no matching overload", compileType: apiservercel.ErrorTypeInvalid, compileIs: apiservercel.ErrCompilation},
		{name: "unknown field", expression: `device.vendor == "x"`, compileErr: "undefined field 'vendor'", compileType: apiservercel.ErrorTypeInvalid},
		{name: "unknown variable", expression: `request.name == "x"`, compileErr: "undeclared reference", compileType: apiservercel.ErrorTypeInvalid},
		{name: "string result", expression: `device.driver`, compileErr: "must evaluate to bool, not string", compileType: apiservercel.ErrorTypeInvalid},
		{name: "int result", expression: `1 + 2`, compileErr: "must evaluate to bool, not int", compileType: apiservercel.ErrorTypeInvalid},
		{
			name:        "too long",
			expression:  "true || " + strings.Repeat(" ", resourceapi.CELSelectorExpressionMaxLength),
			compileErr:  "the limit is 10240",
			compileType: apiservercel.ErrorTypeInvalid,
			compileIs:   ErrTooLong,
		},
		{
			name:        "too expensive",
			expression:  fmt.Sprintf("%s.all(x, %s.all(y, %s.all(z, x + y + z >= 0)))", bigList(200), bigList(200), bigList(200)),
			compileErr:  "exceeds the device selector cost limit of 1000000",
			compileType: apiservercel.ErrorTypeInvalid,
			compileIs:   ErrTooExpensive,
		},
		{
			name:        "nested comprehension over a big string list",
			expression:  fmt.Sprintf("%s.all(a, %s.all(b, %s.exists(c, (a + b).contains(c))))", bigStringList(100), bigStringList(100), bigStringList(100)),
			compileErr:  "exceeds the device selector cost limit of 1000000",
			compileType: apiservercel.ErrorTypeInvalid,
			compileIs:   ErrTooExpensive,
		},
		{
			name:        "nested comprehension over attribute strings too expensive",
			expression:  `device.attributes["dra.example.com"].all(a, device.attributes["dra.example.com"].all(b, device.attributes["dra.example.com"].all(c, device.attributes["dra.example.com"].all(d, string(device.attributes["dra.example.com"][a]).contains(string(device.attributes["dra.example.com"][d]))))))`,
			compileErr:  "cost limit of 1000000",
			compileType: apiservercel.ErrorTypeInvalid,
			compileIs:   apiservercel.ErrOutOfBudget,
		},
		{
			name:        "custom cost limit applies at compile time",
			expression:  fmt.Sprintf("%s.all(x, x >= 0)", bigList(100)),
			opts:        Options{CostLimit: ptr.To[uint64](10)},
			compileErr:  "cost limit of 10",
			compileType: apiservercel.ErrorTypeInvalid,
		},

		{name: "missing attribute is a runtime error", expression: `device.attributes["dra.example.com"].missing == 1`, evalErr: "no such key: missing"},
		{name: "dyn result that is not bool", expression: `device.attributes["dra.example.com"].cores`, evalErr: "must evaluate to bool, got int"},
		{name: "comparing different types", expression: `device.attributes["dra.example.com"].model == 1`, want: false},
		{
			name:       "runtime cost limit",
			expression: fmt.Sprintf("%s.all(x, %s.all(y, x + y >= 0))", bigList(1000), bigList(1000)),
			opts:       Options{DisableCostEstimation: true},
			evalErr:    "cost limit exceeded",
		},
		{
			name:       "runtime cost limit override",
			expression: fmt.Sprintf("%s.all(x, x >= 0)", bigList(100)),
			opts:       Options{DisableCostEstimation: true, CostLimit: ptr.To[uint64](10)},
			evalErr:    "cost limit exceeded",
		},
		{
			name:       "bad version attribute",
			expression: "true",
			device:     &Device{Driver: testDriver, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {VersionValue: ptr.To("not-a-version")}}},
			evalErr:    "attribute v: parse semantic version",
		},
		{
			name:       "attribute without value",
			expression: "true",
			device:     &Device{Driver: testDriver, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"v": {}}},
			evalErr:    "attribute v: no value set",
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAListTypeAttributes, tc.listAttributes)
			result := GetCompiler().CompileCELExpression(tc.expression, tc.opts)
			if result.Expression != tc.expression {
				t.Errorf("Expression = %q, want the input", result.Expression)
			}
			if tc.compileErr != "" {
				if result.Error == nil {
					t.Fatalf("expected compile error containing %q, got none (max cost %d)", tc.compileErr, result.MaxCost)
				}
				if !strings.Contains(result.Error.Detail, tc.compileErr) {
					t.Errorf("compile error %q does not contain %q", result.Error.Detail, tc.compileErr)
				}
				if result.Error.Type != tc.compileType {
					t.Errorf("compile error type = %s, want %s", result.Error.Type, tc.compileType)
				}
				if tc.compileIs != nil && !errors.Is(result.Error, tc.compileIs) {
					t.Errorf("compile error %v is not %v", result.Error, tc.compileIs)
				}
				if result.Program != nil {
					t.Error("Program set although compilation failed")
				}
				return
			}
			if result.Error != nil {
				t.Fatalf("unexpected compile error: %v", result.Error)
			}
			if !tc.opts.DisableCostEstimation && result.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
				t.Errorf("MaxCost %d over limit without error", result.MaxCost)
			}

			device := testDevice()
			if tc.device != nil {
				device = *tc.device
			}
			got, _, err := result.DeviceMatches(context.Background(), device)
			if tc.evalErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.evalErr) {
					t.Fatalf("evaluation error = %v, want one containing %q", err, tc.evalErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected evaluation error: %v", err)
			}
			if got != tc.want {
				t.Errorf("DeviceMatches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMaxCostEstimate(t *testing.T) {
	compiler := GetCompiler()
	cheap := compiler.CompileCELExpression(`device.driver == "x"`, Options{})
	if cheap.Error != nil || cheap.MaxCost == 0 || cheap.MaxCost > 100 {
		t.Errorf("cheap expression: error %v, MaxCost %d; want a small nonzero cost", cheap.Error, cheap.MaxCost)
	}
	disabled := compiler.CompileCELExpression(`device.driver == "x"`, Options{DisableCostEstimation: true})
	if disabled.MaxCost != ^uint64(0) {
		t.Errorf("MaxCost with estimation disabled = %d, want MaxUint64", disabled.MaxCost)
	}
	// An iteration over attributes is bounded by the declared map sizes,
	// so it must get a finite estimate well under the limit.
	iter := compiler.CompileCELExpression(`device.attributes.all(d, device.attributes[d].size() < 10)`, Options{})
	if iter.Error != nil || iter.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		t.Errorf("bounded iteration: error %v, MaxCost %d", iter.Error, iter.MaxCost)
	}
}

func TestEnvironmentTypes(t *testing.T) {
	compiler := GetCompiler()
	for _, envType := range []environment.Type{environment.NewExpressions, environment.StoredExpressions} {
		result := compiler.CompileCELExpression(`device.driver == "x"`, Options{EnvType: ptr.To(envType)})
		if result.Error != nil {
			t.Errorf("%s: %v", envType, result.Error)
		}
	}
	result := compiler.CompileCELExpression(`true`, Options{EnvType: ptr.To(environment.Type("bogus"))})
	if result.Error == nil || result.Error.Type != apiservercel.ErrorTypeInternal {
		t.Errorf("unknown env type: got %v, want internal error", result.Error)
	}
}

func TestDeviceInputReuse(t *testing.T) {
	compiler := GetCompiler()
	input, err := NewDeviceInput(testDevice())
	if err != nil {
		t.Fatal(err)
	}
	for expression, want := range map[string]bool{
		`device.attributes["dra.example.com"].cores == 108`:                        true,
		`device.attributes["dra.example.com"].cores == 1`:                          false,
		`device.capacity["dra.example.com"].memory.isGreaterThan(quantity("1Gi"))`: true,
	} {
		result := compiler.CompileCached(expression)
		for range 3 {
			got, _, err := result.DeviceInputMatches(context.Background(), input)
			if err != nil || got != want {
				t.Errorf("%s: got %v, %v; want %v", expression, got, err, want)
			}
		}
	}
}

func TestFailedResultDoesNotEvaluate(t *testing.T) {
	result := GetCompiler().CompileCELExpression(`device.nope`, Options{})
	_, _, err := result.DeviceMatches(context.Background(), testDevice())
	if err == nil || !strings.Contains(err.Error(), "undefined field") {
		t.Errorf("got %v, want the compile error", err)
	}
}

func TestSplitQualifiedName(t *testing.T) {
	tests := []struct {
		name       resourceapi.QualifiedName
		domain, id string
	}{
		{"model", testDriver, "model"},
		{"numa.example.com/node", "numa.example.com", "node"},
		{testDriver + "/model", testDriver, "model"},
	}
	for _, tc := range tests {
		domain, id := SplitQualifiedName(tc.name, testDriver)
		if domain != tc.domain || id != tc.id {
			t.Errorf("SplitQualifiedName(%q) = %q, %q; want %q, %q", tc.name, domain, id, tc.domain, tc.id)
		}
	}
}

func TestCompileCache(t *testing.T) {
	compiler := newCompiler(2, attributesByDomainType)
	first := compiler.CompileCached(`device.driver == "a"`)
	again := compiler.CompileCached(`device.driver == "a"`)
	if first.Program == nil || first.Program != again.Program {
		t.Error("second CompileCached of the same expression did not return the cached program")
	}
	bad := compiler.CompileCached(`device.nope`)
	if bad.Error == nil {
		t.Error("compile error not reported through the cache")
	}
	if compiler.cache.len() != 2 {
		t.Errorf("cache holds %d entries, want 2", compiler.cache.len())
	}
	compiler.CompileCached(`device.driver == "a"`) // a is now most recent; b(ad) is evicted next
	compiler.CompileCached(`device.driver == "c"`)
	if compiler.cache.len() != 2 {
		t.Errorf("cache holds %d entries after eviction, want 2", compiler.cache.len())
	}
	if _, ok := compiler.cache.get(`device.nope`); ok {
		t.Error("least recently used entry was not evicted")
	}
	if _, ok := compiler.cache.get(`device.driver == "a"`); !ok {
		t.Error("recently used entry was evicted")
	}
}

func TestCompileCacheConcurrent(t *testing.T) {
	compiler := newCompiler(8, attributesByDomainType)
	device := testDevice()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				expression := fmt.Sprintf(`device.attributes["dra.example.com"].cores == %d`, 100+(i+j)%12)
				matches, _, err := compiler.CompileCached(expression).DeviceMatches(context.Background(), device)
				if err != nil {
					errs <- err
					return
				}
				if want := 100+(i+j)%12 == 108; matches != want {
					errs <- fmt.Errorf("%s: got %v", expression, matches)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := compiler.cache.len(); n > 8 {
		t.Errorf("cache grew to %d entries, capacity 8", n)
	}
}

func BenchmarkDeviceInputMatches(b *testing.B) {
	result := GetCompiler().CompileCached(`device.attributes["dra.example.com"].model == "a100" && device.capacity["dra.example.com"].memory.isGreaterThan(quantity("1Gi"))`)
	input, err := NewDeviceInput(testDevice())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if ok, _, err := result.DeviceInputMatches(ctx, input); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// TestCompileForValidation: validation compiles an expression once, keeps
// failures and does not keep long expressions.
func TestCompileForValidation(t *testing.T) {
	compiler := newCompiler(8, attributesByDomainType)
	first := compiler.CompileForValidation(`device.driver == "a"`)
	if first.Error != nil || first.MaxCost == math.MaxUint64 {
		t.Fatalf("want a program with an estimated cost, got %+v", first)
	}
	if again := compiler.CompileForValidation(`device.driver == "a"`); again.Program != first.Program {
		t.Error("the second validation of the same expression compiled it again")
	}
	if compiler.cache.len() != 0 {
		t.Error("validation filled the evaluation cache")
	}
	bad := compiler.CompileForValidation(`device.nope`)
	if bad.Error == nil {
		t.Fatal("want a compile error")
	}
	if again := compiler.CompileForValidation(`device.nope`); again.Error != bad.Error {
		t.Error("the failure was not remembered")
	}
	long := `device.driver == "` + strings.Repeat("a", validationCacheMaxLength) + `"`
	if result := compiler.CompileForValidation(long); result.Error != nil {
		t.Fatal(result.Error)
	}
	if n := compiler.validated.len(); n != 2 {
		t.Errorf("validation cache holds %d entries, want 2 (the long expression is not kept)", n)
	}
}
