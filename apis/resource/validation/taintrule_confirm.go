package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// ConfirmSelectAllDevicesAnnotation must be set to "true" on a
// DeviceTaintRule whose deviceSelector is empty ({}): such a selector
// matches every device of every driver, and with effect NoExecute it
// evicts every pod that uses a device. Requiring the annotation turns a
// forgotten field into an error instead of a cluster-wide eviction.
const ConfirmSelectAllDevicesAnnotation = "resource.draplane.dev/confirm-select-all-devices"

// selectsAllDevices reports whether the rule's selector is present but
// constrains nothing. A nil selector matches no device and is harmless.
func selectsAllDevices(spec *resourceapi.DeviceTaintRuleSpec) bool {
	selector := spec.DeviceSelector
	return selector != nil && selector.Driver == nil && selector.Pool == nil && selector.Device == nil
}

func confirmedSelectAll(rule *resourceapi.DeviceTaintRule) bool {
	return rule.Annotations[ConfirmSelectAllDevicesAnnotation] == "true"
}

// validateSelectAllConfirmed rejects a rule that selects every device
// without the confirmation annotation. On update, a rule that was already
// stored unconfirmed with an empty selector (before this check existed)
// stays acceptable as long as it still is exactly that, so that its status
// and metadata can still be written.
func validateSelectAllConfirmed(rule, old *resourceapi.DeviceTaintRule) field.ErrorList {
	if !selectsAllDevices(&rule.Spec) || confirmedSelectAll(rule) {
		return nil
	}
	if old != nil && selectsAllDevices(&old.Spec) && !confirmedSelectAll(old) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "deviceSelector"),
		`an empty selector matches every device in the cluster; set the annotation `+
			ConfirmSelectAllDevicesAnnotation+`: "true" to confirm, or set driver, pool or device`)}
}
