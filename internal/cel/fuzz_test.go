package cel

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// FuzzCompile: compiling any string never panics; what compiles is either
// rejected as too expensive or evaluates against a device to a bool or an
// error, within the runtime cost limit, without panicking.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		`device.driver == "gpu.example.com"`,
		`device.attributes["gpu.example.com"].model == "a100"`,
		`device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))`,
		`device.capacity["gpu.example.com"].memory.compareTo(quantity("10Gi")) >= 0`,
		`has(device.attributes["other.example.com"].x) || device.allowMultipleAllocations`,
		`["a","b"].all(x, ["c","d"].exists(y, x + y == "ad"))`,
		`device.attributes["gpu.example.com"].index < 4 && device.attributes["gpu.example.com"].index >= 0`,
		`1 / 0 == 1`,
		`)`,
	} {
		f.Add(seed)
	}
	device := Device{
		Driver: "gpu.example.com",
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"model":                   {StringValue: ptr.To("a100")},
			"index":                   {IntValue: ptr.To[int64](1)},
			"healthy":                 {BoolValue: ptr.To(true)},
			"driverVersion":           {VersionValue: ptr.To("1.2.3")},
			"other.example.com/flags": {StringValue: ptr.To("x")},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory": {Value: resource.MustParse("40Gi")},
		},
	}
	compiler := GetCompiler()
	f.Fuzz(func(t *testing.T, expression string) {
		result := compiler.CompileCELExpression(expression, Options{})
		if result.Error != nil {
			return
		}
		if result.Program == nil {
			t.Fatalf("no error and no program for %q", expression)
		}
		_, _, _ = result.DeviceMatches(context.Background(), device)
	})
}
