package validation

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

func TestValidateDeviceTaintRuleSelectAllConfirmation(t *testing.T) {
	selectAll := func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{} }
	confirm := func(value string) func(*resourceapi.DeviceTaintRule) {
		return func(r *resourceapi.DeviceTaintRule) {
			r.Annotations = map[string]string{ConfirmSelectAllDevicesAnnotation: value}
		}
	}
	apply := func(mutations ...func(*resourceapi.DeviceTaintRule)) *resourceapi.DeviceTaintRule {
		rule := validTaintRule()
		for _, mutate := range mutations {
			mutate(rule)
		}
		return rule
	}
	rejected := []string{forbidden("spec.deviceSelector")}

	tests := map[string]struct {
		rule *resourceapi.DeviceTaintRule
		// old makes it an update.
		old  *resourceapi.DeviceTaintRule
		want []string
	}{
		"create: empty selector unconfirmed": {rule: apply(selectAll), want: rejected},
		"create: empty selector confirmed":   {rule: apply(selectAll, confirm("true"))},
		"create: confirmation not true":      {rule: apply(selectAll, confirm("yes")), want: rejected},
		"create: confirmation empty":         {rule: apply(selectAll, confirm("")), want: rejected},
		"create: nil selector":               {rule: apply(func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector = nil })},
		"create: driver only":                {rule: apply(selectAll, func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Driver = ptr.To("gpu.example.com") })},
		"create: pool only":                  {rule: apply(selectAll, func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Pool = ptr.To("node-1") })},
		"create: device only":                {rule: apply(selectAll, func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Device = ptr.To("gpu-0") })},
		"create: effect None still needs it": {rule: apply(selectAll, func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = resourceapi.DeviceTaintEffectNone }), want: rejected},
		"update: widen to empty unconfirmed": {rule: apply(selectAll), old: apply(), want: rejected},
		"update: widen to empty confirmed":   {rule: apply(selectAll, confirm("true")), old: apply()},
		"update: drop the confirmation":      {rule: apply(selectAll), old: apply(selectAll, confirm("true")), want: rejected},
		"update: stored before the check":    {rule: apply(selectAll, func(r *resourceapi.DeviceTaintRule) { r.Labels = map[string]string{"a": "b"} }), old: apply(selectAll)},
		"update: narrow unconfirmed":         {rule: apply(), old: apply(selectAll)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var errs = ValidateDeviceTaintRule(tc.rule)
			if tc.old != nil {
				tc.old.ResourceVersion = "1"
				tc.rule.ResourceVersion = "1"
				errs = ValidateDeviceTaintRuleUpdate(tc.rule, tc.old)
			}
			assertErrors(t, errs, tc.want)
			if len(tc.want) > 0 {
				if detail := errorDetail(errs, "spec.deviceSelector"); !strings.Contains(detail, ConfirmSelectAllDevicesAnnotation) {
					t.Errorf("message %q does not name the annotation %s", detail, ConfirmSelectAllDevicesAnnotation)
				}
			}
		})
	}
}

// selectAllConfirmed gives the rule an empty selector with the
// confirmation; TestValidateDeviceTaintRuleSelectAllConfirmation covers
// the unconfirmed cases.
func selectAllConfirmed(r *resourceapi.DeviceTaintRule) {
	r.Annotations = map[string]string{ConfirmSelectAllDevicesAnnotation: "true"}
	r.Spec.DeviceSelector = &resourceapi.DeviceTaintSelector{}
}
