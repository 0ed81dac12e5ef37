package validation

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Expected errors are written as "<type> <path>", e.g.
// invalid("spec.devices.requests[0].name"). A test passes when the set of
// (type, path) pairs of the returned errors is exactly the expected set.
func required(path string) string     { return errString(field.ErrorTypeRequired, path) }
func invalid(path string) string      { return errString(field.ErrorTypeInvalid, path) }
func forbidden(path string) string    { return errString(field.ErrorTypeForbidden, path) }
func tooMany(path string) string      { return errString(field.ErrorTypeTooMany, path) }
func tooLong(path string) string      { return errString(field.ErrorTypeTooLong, path) }
func duplicate(path string) string    { return errString(field.ErrorTypeDuplicate, path) }
func notSupported(path string) string { return errString(field.ErrorTypeNotSupported, path) }
func notFound(path string) string     { return errString(field.ErrorTypeNotFound, path) }

func errString(t field.ErrorType, path string) string { return string(t) + " " + path }

func assertErrors(t *testing.T, got field.ErrorList, want []string) {
	t.Helper()
	var gotKeys []string
	for _, err := range got {
		key := errString(err.Type, err.Field)
		if !slices.Contains(gotKeys, key) {
			gotKeys = append(gotKeys, key)
		}
	}
	slices.Sort(gotKeys)
	wantKeys := slices.Clone(want)
	slices.Sort(wantKeys)
	wantKeys = slices.Compact(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		var details strings.Builder
		for _, err := range got {
			fmt.Fprintf(&details, "\n  %v", err)
		}
		t.Errorf("errors:\n  got  %q\n  want %q\nfull errors:%s", gotKeys, wantKeys, details.String())
	}
}

// errorDetail returns the detail of the first error at path, for tests
// that check what a message says.
func errorDetail(errs field.ErrorList, path string) string {
	for _, err := range errs {
		if err.Field == path {
			return err.Detail
		}
	}
	return ""
}

func rawJSON(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func opaqueConfig(driver, params string) resourceapi.DeviceConfiguration {
	return resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driver, Parameters: rawJSON(params)}}
}

func celSelector(expression string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expression}}
}

func selectors(n int) []resourceapi.DeviceSelector {
	out := make([]resourceapi.DeviceSelector, n)
	for i := range out {
		out[i] = celSelector("true")
	}
	return out
}

// bigList renders a CEL list literal of n ints.
func bigList(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// expensiveExpression compiles but its estimated cost is far over the limit.
var expensiveExpression = fmt.Sprintf("%s.all(x, %s.all(y, %s.all(z, x + y + z >= 0)))", bigList(200), bigList(200), bigList(200))

func condition(conditionType string) metav1.Condition {
	return metav1.Condition{
		Type:               conditionType,
		Status:             metav1.ConditionTrue,
		Reason:             "Testing",
		LastTransitionTime: metav1.Now(),
	}
}

func conditions(n int) []metav1.Condition {
	out := make([]metav1.Condition, n)
	for i := range out {
		out[i] = condition(fmt.Sprintf("Type%d", i))
	}
	return out
}

func nodeSelector(terms int) *corev1.NodeSelector {
	selector := &corev1.NodeSelector{}
	for i := range terms {
		selector.NodeSelectorTerms = append(selector.NodeSelectorTerms, corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{fmt.Sprintf("z%d", i)}}},
		})
	}
	return selector
}

func validClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{celSelector(`device.driver == "gpu.example.com"`)},
			Config:    []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: opaqueConfig("gpu.example.com", `{"mode":"fast"}`)}},
		},
	}
}

func TestValidateDeviceClass(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.DeviceClass)
		want   []string
	}{
		"valid":         {mutate: func(*resourceapi.DeviceClass) {}},
		"empty spec":    {mutate: func(c *resourceapi.DeviceClass) { c.Spec = resourceapi.DeviceClassSpec{} }},
		"missing name":  {mutate: func(c *resourceapi.DeviceClass) { c.Name = "" }, want: []string{required("metadata.name")}},
		"bad name":      {mutate: func(c *resourceapi.DeviceClass) { c.Name = "Bad_Name" }, want: []string{invalid("metadata.name")}},
		"namespace set": {mutate: func(c *resourceapi.DeviceClass) { c.Namespace = "default" }, want: []string{forbidden("metadata.namespace")}},
		"bad label":     {mutate: func(c *resourceapi.DeviceClass) { c.Labels = map[string]string{"a": "-bad-"} }, want: []string{invalid("metadata.labels")}},
		"32 selectors":  {mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors = selectors(32) }},
		"33 selectors":  {mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors = selectors(33) }, want: []string{tooMany("spec.selectors")}},
		"selector no cel": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors = []resourceapi.DeviceSelector{{}} },
			want:   []string{required("spec.selectors[0].cel")},
		},
		"empty expression": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors = []resourceapi.DeviceSelector{celSelector("")} },
			want:   []string{required("spec.selectors[0].cel.expression")},
		},
		"expression syntax error": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors[0] = celSelector("device.driver ==") },
			want:   []string{invalid("spec.selectors[0].cel.expression")},
		},
		"expression unknown field": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors[0] = celSelector(`device.vendor == "x"`) },
			want:   []string{invalid("spec.selectors[0].cel.expression")},
		},
		"expression not bool": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors[0] = celSelector(`device.driver`) },
			want:   []string{invalid("spec.selectors[0].cel.expression")},
		},
		"expression too long": {
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Selectors[0] = celSelector("true" + strings.Repeat(" ", resourceapi.CELSelectorExpressionMaxLength))
			},
			want: []string{tooLong("spec.selectors[0].cel.expression")},
		},
		"expression at max length": {
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Selectors[0] = celSelector("true" + strings.Repeat(" ", resourceapi.CELSelectorExpressionMaxLength-4))
			},
		},
		"expression too expensive": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors[0] = celSelector(expensiveExpression) },
			want:   []string{forbidden("spec.selectors[0].cel.expression")},
		},
		"semver and quantity expression": {
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Selectors[0] = celSelector(`device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.0.0")) && device.capacity["gpu.example.com"].memory.compareTo(quantity("1Gi")) >= 0`)
			},
		},
		"32 configs": {
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Config = make([]resourceapi.DeviceClassConfiguration, 32)
				for i := range c.Spec.Config {
					c.Spec.Config[i].DeviceConfiguration = opaqueConfig("gpu.example.com", "{}")
				}
			},
		},
		"33 configs": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config = make([]resourceapi.DeviceClassConfiguration, 33) },
			want:   []string{tooMany("spec.config")},
		},
		"config without opaque": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque = nil },
			want:   []string{required("spec.config[0].opaque")},
		},
		"config driver missing": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Driver = "" },
			want:   []string{required("spec.config[0].opaque.driver")},
		},
		"config driver invalid": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Driver = "not_a_domain" },
			want:   []string{invalid("spec.config[0].opaque.driver")},
		},
		"config driver upper case is fine": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Driver = "GPU.example.com" },
		},
		"config driver too long": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Driver = strings.Repeat("a", 64) },
			want:   []string{tooLong("spec.config[0].opaque.driver")},
		},
		"parameters missing": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Parameters = runtime.RawExtension{} },
			want:   []string{required("spec.config[0].opaque.parameters")},
		},
		"parameters null": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Parameters = rawJSON("null") },
			want:   []string{required("spec.config[0].opaque.parameters")},
		},
		"parameters not JSON": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Parameters = rawJSON("{") },
			want:   []string{invalid("spec.config[0].opaque.parameters")},
		},
		"parameters not an object": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.Config[0].Opaque.Parameters = rawJSON("[1]") },
			want:   []string{invalid("spec.config[0].opaque.parameters")},
		},
		"parameters at limit": {
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Config[0].Opaque.Parameters = rawJSON(`{"a":"` + strings.Repeat("x", resourceapi.OpaqueParametersMaxLength-8) + `"}`)
			},
		},
		"parameters too large": {
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Config[0].Opaque.Parameters = rawJSON(`{"a":"` + strings.Repeat("x", resourceapi.OpaqueParametersMaxLength) + `"}`)
			},
			want: []string{tooLong("spec.config[0].opaque.parameters")},
		},
		"extended resource name": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("example.com/gpu") },
		},
		"extended resource name without domain": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("gpu") },
			want:   []string{invalid("spec.extendedResourceName")},
		},
		"extended resource name in kubernetes.io": {
			mutate: func(c *resourceapi.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("kubernetes.io/gpu") },
			want:   []string{invalid("spec.extendedResourceName")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			class := validClass()
			tc.mutate(class)
			assertErrors(t, ValidateDeviceClass(class), tc.want)
		})
	}
}

func TestValidateDeviceClassUpdate(t *testing.T) {
	bigParams := rawJSON(`{"a":"` + strings.Repeat("x", resourceapi.OpaqueParametersMaxLength) + `"}`)
	// storedClass was accepted under older rules: its selector is now too
	// expensive and its parameters too large.
	storedClass := func() *resourceapi.DeviceClass {
		class := validClass()
		class.ResourceVersion = "1"
		class.Spec.Selectors = []resourceapi.DeviceSelector{celSelector(expensiveExpression), celSelector("true")}
		class.Spec.Config[0].Opaque.Parameters = bigParams
		return class
	}
	tests := map[string]struct {
		old    *resourceapi.DeviceClass
		mutate func(*resourceapi.DeviceClass)
		want   []string
	}{
		"valid change":         {old: validClass(), mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors[0] = celSelector("false") }},
		"invalid new selector": {old: validClass(), mutate: func(c *resourceapi.DeviceClass) { c.Spec.Selectors[0] = celSelector("1") }, want: []string{invalid("spec.selectors[0].cel.expression")}},
		"name change": {
			old: validClass(), mutate: func(c *resourceapi.DeviceClass) { c.Name = "other" },
			want: []string{invalid("metadata.name")},
		},
		"stored expensive selector unchanged": {old: storedClass(), mutate: func(c *resourceapi.DeviceClass) { c.Labels = map[string]string{"a": "b"} }},
		"stored expensive selector reordered": {
			old:    storedClass(),
			mutate: func(c *resourceapi.DeviceClass) { slices.Reverse(c.Spec.Selectors) },
		},
		"new expensive selector next to stored one": {
			old: storedClass(),
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Selectors = append(c.Spec.Selectors, celSelector(expensiveExpression+" || true"))
			},
			want: []string{forbidden("spec.selectors[2].cel.expression")},
		},
		"stored large parameters unchanged": {old: storedClass(), mutate: func(c *resourceapi.DeviceClass) {}},
		"stored large parameters changed": {
			old: storedClass(),
			mutate: func(c *resourceapi.DeviceClass) {
				c.Spec.Config[0].Opaque.Parameters = rawJSON(`{"b":"` + strings.Repeat("x", resourceapi.OpaqueParametersMaxLength) + `"}`)
			},
			want: []string{tooLong("spec.config[0].opaque.parameters")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.old.ResourceVersion = "1"
			class := tc.old.DeepCopy()
			tc.mutate(class)
			assertErrors(t, ValidateDeviceClassUpdate(class, tc.old), tc.want)
		})
	}
}

func validTaintRule() *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "maintenance"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{
				Driver: ptr.To("gpu.example.com"),
				Pool:   ptr.To("node-1/pool"),
				Device: ptr.To("gpu-0"),
			},
			Taint: resourceapi.DeviceTaint{Key: "example.com/maintenance", Value: "planned", Effect: resourceapi.DeviceTaintEffectNoExecute},
		},
	}
}

func TestValidateDeviceTaintRule(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.DeviceTaintRule)
		want   []string
	}{
		"valid":          {mutate: func(*resourceapi.DeviceTaintRule) {}},
		"no selector":    {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector = nil }},
		"empty selector": {mutate: selectAllConfirmed},
		"effect None":    {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = resourceapi.DeviceTaintEffectNone }},
		"namespaced":     {mutate: func(r *resourceapi.DeviceTaintRule) { r.Namespace = "default" }, want: []string{forbidden("metadata.namespace")}},
		"bad name":       {mutate: func(r *resourceapi.DeviceTaintRule) { r.Name = "UPPER" }, want: []string{invalid("metadata.name")}},
		"bad driver":     {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Driver = ptr.To("a_b") }, want: []string{invalid("spec.deviceSelector.driver")}},
		"empty driver":   {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Driver = ptr.To("") }, want: []string{required("spec.deviceSelector.driver")}},
		"bad pool":       {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Pool = ptr.To("a//b") }, want: []string{invalid("spec.deviceSelector.pool")}},
		"pool too long": {mutate: func(r *resourceapi.DeviceTaintRule) {
			r.Spec.DeviceSelector.Pool = ptr.To(strings.Repeat("a/", 127) + "a")
		}, want: []string{tooLong("spec.deviceSelector.pool")}},
		"bad device":         {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Device = ptr.To("gpu.0") }, want: []string{invalid("spec.deviceSelector.device")}},
		"missing taint key":  {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Key = "" }, want: []string{invalid("spec.taint.key")}},
		"bad taint key":      {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Key = "a/b/c" }, want: []string{invalid("spec.taint.key")}},
		"bad taint value":    {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Value = "not valid" }, want: []string{invalid("spec.taint.value")}},
		"missing effect":     {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = "" }, want: []string{required("spec.taint.effect")}},
		"unknown effect":     {mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = "PreferNoSchedule" }, want: []string{notSupported("spec.taint.effect")}},
		"8 conditions":       {mutate: func(r *resourceapi.DeviceTaintRule) { r.Status.Conditions = conditions(8) }},
		"9 conditions":       {mutate: func(r *resourceapi.DeviceTaintRule) { r.Status.Conditions = conditions(9) }, want: []string{tooMany("status.conditions")}},
		"condition bad type": {mutate: func(r *resourceapi.DeviceTaintRule) { r.Status.Conditions = []metav1.Condition{condition("a b")} }, want: []string{invalid("status.conditions[0].type")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rule := validTaintRule()
			tc.mutate(rule)
			assertErrors(t, ValidateDeviceTaintRule(rule), tc.want)
		})
	}
}

func TestValidateDeviceTaintRuleUpdate(t *testing.T) {
	// An effect that is no longer supported stays acceptable while unchanged.
	oldWithUnknownEffect := validTaintRule()
	oldWithUnknownEffect.Spec.Taint.Effect = "Retired"

	tests := map[string]struct {
		old    *resourceapi.DeviceTaintRule
		mutate func(*resourceapi.DeviceTaintRule)
		want   []string
	}{
		"change value":            {old: validTaintRule(), mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Value = "unplanned" }},
		"change to bad effect":    {old: validTaintRule(), mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = "Retired" }, want: []string{notSupported("spec.taint.effect")}},
		"unchanged stored effect": {old: oldWithUnknownEffect, mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Value = "x" }},
		"bad selector":            {old: validTaintRule(), mutate: func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Device = ptr.To("") }, want: []string{required("spec.deviceSelector.device")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.old.ResourceVersion = "1"
			rule := tc.old.DeepCopy()
			tc.mutate(rule)
			assertErrors(t, ValidateDeviceTaintRuleUpdate(rule, tc.old), tc.want)
		})
	}
}

func TestValidateDeviceTaintRuleStatusUpdate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.DeviceTaintRule)
		want   []string
	}{
		"add condition": {mutate: func(r *resourceapi.DeviceTaintRule) { r.Status.Conditions = conditions(1) }},
		"8 conditions":  {mutate: func(r *resourceapi.DeviceTaintRule) { r.Status.Conditions = conditions(8) }},
		"9 conditions":  {mutate: func(r *resourceapi.DeviceTaintRule) { r.Status.Conditions = conditions(9) }, want: []string{tooMany("status.conditions")}},
		"duplicate type": {mutate: func(r *resourceapi.DeviceTaintRule) {
			r.Status.Conditions = []metav1.Condition{condition("A"), condition("A")}
		}, want: []string{duplicate("status.conditions[1]")}},
		"missing reason": {mutate: func(r *resourceapi.DeviceTaintRule) {
			r.Status.Conditions = conditions(1)
			r.Status.Conditions[0].Reason = ""
		}, want: []string{required("status.conditions[0].reason")}},
		"bad status": {mutate: func(r *resourceapi.DeviceTaintRule) {
			r.Status.Conditions = conditions(1)
			r.Status.Conditions[0].Status = "Maybe"
		}, want: []string{notSupported("status.conditions[0].status")}},
		"name change": {mutate: func(r *resourceapi.DeviceTaintRule) { r.Name = "other" }, want: []string{invalid("metadata.name")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := validTaintRule()
			old.ResourceVersion = "1"
			rule := old.DeepCopy()
			tc.mutate(rule)
			assertErrors(t, ValidateDeviceTaintRuleStatusUpdate(rule, old), tc.want)
		})
	}
}

func TestIsExtendedResourceName(t *testing.T) {
	for name, want := range map[corev1.ResourceName]bool{
		"example.com/gpu":                        true,
		"deviceclass.resource.kubernetes.io/gpu": false, // a class's implicit name, not an extended resource
		"cpu":                                    false,
		"kubernetes.io/gpu":                      false,
		"sub.kubernetes.io/gpu":                  false,
		"requests.example.com/gpu":               false,
		"example.com/-gpu":                       false,
	} {
		if got := IsExtendedResourceName(name); got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}
