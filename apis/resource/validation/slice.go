package validation

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

const nodeSelectionFields = "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"

func validateResourceSliceSpec(spec, oldSpec *resourceapi.ResourceSliceSpec, fldPath *field.Path) field.ErrorList {
	allErrs := validateDriverName(spec.Driver, fldPath.Child("driver"))
	allErrs = append(allErrs, validatePoolName(spec.Pool.Name, fldPath.Child("pool", "name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("pool", "resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if spec.Pool.Generation < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("pool", "generation"), spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	if oldSpec != nil {
		// Field selectors and consumers index slices by these; changing
		// them would be a different slice.
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(spec.Driver, oldSpec.Driver, fldPath.Child("driver"))...)
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(spec.Pool.Name, oldSpec.Pool.Name, fldPath.Child("pool", "name"))...)
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(spec.NodeName, oldSpec.NodeName, fldPath.Child("nodeName"))...)
	}

	nodeErrs, perDevice := validateNodeSelection(spec, fldPath)
	allErrs = append(allErrs, nodeErrs...)

	if len(spec.SharedCounters) > 0 && len(spec.Devices) > 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, "{`sharedCounters`, `devices`}", "only one of `sharedCounters` or `devices` may be set"))
	}

	// Taints and counter consumption make devices larger, so fewer fit
	// into one object.
	maxDevices := resourceapi.ResourceSliceMaxDevices
	for _, device := range spec.Devices {
		if len(device.Taints) > 0 || len(device.ConsumesCounters) > 0 {
			maxDevices = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			break
		}
	}
	allErrs = append(allErrs, validateSet(spec.Devices, maxDevices,
		func(device resourceapi.Device, fldPath *field.Path) field.ErrorList {
			return validateDevice(device, lookupDevice(oldSpec, device.Name), fldPath, perDevice)
		},
		func(device resourceapi.Device) string { return device.Name }, fldPath.Child("devices"))...)

	allErrs = append(allErrs, validateSet(spec.SharedCounters, resourceapi.ResourceSliceMaxCounterSets,
		func(set resourceapi.CounterSet, fldPath *field.Path) field.ErrorList {
			errs := validateCounterName(set.Name, fldPath.Child("name"))
			return append(errs, validateCounters(set.Counters, resourceapi.ResourceSliceMaxCountersPerCounterSet, fldPath.Child("counters"))...)
		},
		func(set resourceapi.CounterSet) string { return set.Name }, fldPath.Child("sharedCounters"))...)
	return append(allErrs, validateSliceAlphaFields(spec, fldPath)...)
}

// validateNodeSelection checks that exactly one way of selecting nodes is
// set, and reports whether devices select their nodes themselves.
func validateNodeSelection(spec *resourceapi.ResourceSliceSpec, fldPath *field.Path) (field.ErrorList, bool) {
	var allErrs field.ErrorList
	var setFields []string
	if spec.NodeName != nil {
		if *spec.NodeName == "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeName"), "", "must be either unset or set to a non-empty string"))
		} else {
			setFields = append(setFields, "`nodeName`")
			allErrs = append(allErrs, validateNodeName(*spec.NodeName, fldPath.Child("nodeName"))...)
		}
	}
	if spec.NodeSelector != nil {
		setFields = append(setFields, "`nodeSelector`")
		allErrs = append(allErrs, ValidateNodeSelector(spec.NodeSelector, false, fldPath.Child("nodeSelector"))...)
		if n := len(spec.NodeSelector.NodeSelectorTerms); n > 1 {
			// One term keeps merging the selectors of devices from
			// different slices into one allocation result simple.
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeSelector", "nodeSelectorTerms"), n, "must have exactly one node selector term"))
		}
	}
	if spec.AllNodes != nil {
		if *spec.AllNodes {
			setFields = append(setFields, "`allNodes`")
		} else {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("allNodes"), false, "must be either unset or set to true"))
		}
	}
	perDevice := spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection
	if spec.PerDeviceNodeSelection != nil {
		if perDevice {
			setFields = append(setFields, "`perDeviceNodeSelection`")
		} else {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("perDeviceNodeSelection"), false, "must be either unset or set to true"))
		}
	}
	switch len(setFields) {
	case 0:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of "+nodeSelectionFields+" is required"))
	case 1:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, "{"+strings.Join(setFields, ", ")+"}",
			"exactly one of "+nodeSelectionFields+" is required, but multiple fields are set"))
	}
	return allErrs, perDevice
}

func lookupDevice(spec *resourceapi.ResourceSliceSpec, name string) *resourceapi.Device {
	if spec == nil {
		return nil
	}
	for i := range spec.Devices {
		if spec.Devices[i].Name == name {
			return &spec.Devices[i]
		}
	}
	return nil
}

func validateCounters(counters map[string]resourceapi.Counter, maxSize int, fldPath *field.Path) field.ErrorList {
	if len(counters) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return validateMap(counters, maxSize, validateCounterName, nil, fldPath)
}

// validateDevice checks one device. oldDevice is the device of the same
// name before an update: capacity and taints that did not change are not
// validated again, so that tightened rules don't brick existing slices.
func validateDevice(device resourceapi.Device, oldDevice *resourceapi.Device, fldPath *field.Path, perDeviceNodeSelection bool) field.ErrorList {
	allErrs := validateDeviceName(device.Name, fldPath.Child("name"))

	if n := len(device.Attributes) + len(device.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		allErrs = append(allErrs, field.Invalid(fldPath, n,
			fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
	} else {
		allErrs = append(allErrs, validateMap(device.Attributes, -1, validateQualifiedName, validateDeviceAttribute, fldPath.Child("attributes"))...)
		if oldDevice == nil || !apiequality.Semantic.DeepEqual(oldDevice.Capacity, device.Capacity) {
			multiple := device.AllowMultipleAllocations != nil && *device.AllowMultipleAllocations
			allErrs = append(allErrs, validateMap(device.Capacity, -1, validateQualifiedName,
				func(capacity resourceapi.DeviceCapacity, fldPath *field.Path) field.ErrorList {
					return validateDeviceCapacity(capacity, multiple, fldPath)
				}, fldPath.Child("capacity"))...)
		}
	}

	if oldDevice == nil || !apiequality.Semantic.DeepEqual(oldDevice.Taints, device.Taints) {
		allErrs = append(allErrs, validateSlice(device.Taints, resourceapi.DeviceTaintsMaxLength,
			func(taint resourceapi.DeviceTaint, fldPath *field.Path) field.ErrorList {
				return validateDeviceTaint(taint, nil, fldPath)
			}, fldPath.Child("taints"))...)
	}

	allErrs = append(allErrs, validateSet(device.ConsumesCounters, resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice,
		func(consumption resourceapi.DeviceCounterConsumption, fldPath *field.Path) field.ErrorList {
			errs := validateCounterName(consumption.CounterSet, fldPath.Child("counterSet"))
			return append(errs, validateCounters(consumption.Counters, resourceapi.ResourceSliceMaxCountersPerDeviceCounterConsumption, fldPath.Child("counters"))...)
		},
		func(consumption resourceapi.DeviceCounterConsumption) string { return consumption.CounterSet },
		fldPath.Child("consumesCounters"))...)

	allErrs = append(allErrs, validateDeviceNodeSelection(device, fldPath, perDeviceNodeSelection)...)
	allErrs = append(allErrs, validateBindingConditions(device.BindingConditions, device.BindingFailureConditions, fldPath)...)
	return append(allErrs, validateDeviceAlphaFields(device, oldDevice, fldPath)...)
}

func validateDeviceNodeSelection(device resourceapi.Device, fldPath *field.Path, perDeviceNodeSelection bool) field.ErrorList {
	if !perDeviceNodeSelection {
		if device.NodeName != nil || device.NodeSelector != nil || device.AllNodes != nil {
			return field.ErrorList{field.Invalid(fldPath, device.Name,
				"`nodeName`, `nodeSelector` and `allNodes` may only be set when `perDeviceNodeSelection` is true in the ResourceSlice spec")}
		}
		return nil
	}
	var allErrs field.ErrorList
	var setFields []string
	if device.NodeName != nil {
		if *device.NodeName == "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeName"), "", "must not be empty"))
		} else {
			setFields = append(setFields, "`nodeName`")
			allErrs = append(allErrs, validateNodeName(*device.NodeName, fldPath.Child("nodeName"))...)
		}
	}
	if device.NodeSelector != nil {
		setFields = append(setFields, "`nodeSelector`")
		allErrs = append(allErrs, ValidateNodeSelector(device.NodeSelector, false, fldPath.Child("nodeSelector"))...)
	}
	if device.AllNodes != nil {
		if *device.AllNodes {
			setFields = append(setFields, "`allNodes`")
		} else {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("allNodes"), false, "must be either unset or set to true"))
		}
	}
	const msg = "exactly one of `nodeName`, `nodeSelector` or `allNodes` is required when `perDeviceNodeSelection` is true in the ResourceSlice spec"
	switch len(setFields) {
	case 0:
		allErrs = append(allErrs, field.Required(fldPath, msg))
	case 1:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, "{"+strings.Join(setFields, ", ")+"}", msg))
	}
	return allErrs
}

// semverPattern is semver 2.0.0: MAJOR.MINOR.PATCH without leading zeros,
// optional pre-release and build metadata.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

func validateDeviceAttribute(attribute resourceapi.DeviceAttribute, fldPath *field.Path) field.ErrorList {
	set, allErrs := validateListAttribute(attribute, fldPath)
	if attribute.IntValue != nil {
		set++
	}
	if attribute.BoolValue != nil {
		set++
	}
	if attribute.StringValue != nil {
		set++
		if len(*attribute.StringValue) > resourceapi.DeviceAttributeMaxValueLength {
			allErrs = append(allErrs, field.TooLong(fldPath.Child("string"), "", resourceapi.DeviceAttributeMaxValueLength))
		}
	}
	if attribute.VersionValue != nil {
		set++
		allErrs = append(allErrs, validateVersionValue(*attribute.VersionValue, fldPath.Child("version"))...)
	}
	switch set {
	case 0:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of `int`, `bool`, `string`, `version`, `ints`, `bools`, `strings` or `versions` is required"))
	case 1:
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, set, "exactly one of `int`, `bool`, `string`, `version`, `ints`, `bools`, `strings` or `versions` is required, but multiple fields are set"))
	}
	return allErrs
}

// validateVersionValue: a semantic version of at most 64 characters.
func validateVersionValue(version string, fldPath *field.Path) field.ErrorList {
	if len(version) > resourceapi.DeviceAttributeMaxValueLength {
		return field.ErrorList{field.TooLong(fldPath, "", resourceapi.DeviceAttributeMaxValueLength)}
	}
	if !semverPattern.MatchString(version) {
		return field.ErrorList{field.Invalid(fldPath, version, "must be a semantic version (semver.org 2.0.0)")}
	}
	return nil
}

func validateDeviceCapacity(capacity resourceapi.DeviceCapacity, allowMultipleAllocations bool, fldPath *field.Path) field.ErrorList {
	if capacity.RequestPolicy == nil {
		return nil
	}
	policyPath := fldPath.Child("requestPolicy")
	if !allowMultipleAllocations {
		// A policy only says how much of a shared device one allocation
		// takes; without sharing there is nothing to apply it to.
		return field.ErrorList{field.Forbidden(policyPath, "may only be set when the device's allowMultipleAllocations is true")}
	}
	return validateRequestPolicy(capacity.Value, capacity.RequestPolicy, policyPath)
}

func validateRequestPolicy(capacity apiresource.Quantity, policy *resourceapi.CapacityRequestPolicy, fldPath *field.Path) field.ErrorList {
	switch {
	case len(policy.ValidValues) > 0 && policy.ValidRange != nil:
		return field.ErrorList{field.Forbidden(fldPath, "only one of `validValues` and `validRange` may be set")}
	case len(policy.ValidValues) > 0:
		if policy.Default == nil {
			return field.ErrorList{field.Required(fldPath.Child("default"), "required when validValues is set")}
		}
		return validateValidValues(capacity, *policy.Default, policy.ValidValues, fldPath)
	case policy.ValidRange != nil:
		if policy.Default == nil {
			return field.ErrorList{field.Required(fldPath.Child("default"), "required when validRange is set")}
		}
		return validateValidRange(capacity, *policy.Default, *policy.ValidRange, fldPath)
	case policy.Default != nil && policy.Default.Cmp(capacity) > 0:
		return field.ErrorList{field.Invalid(fldPath.Child("default"), policy.Default.String(), "must not be larger than the capacity value "+capacity.String())}
	}
	return nil
}

// validateValidValues: ascending, unique, within the capacity, and the
// default one of them. As upstream, values are told apart by their exact
// value while DRAFractionalCapacityRange is on and by the integer they
// round up to while it is off (500m and 1 are then the same value).
func validateValidValues(capacity, defaultValue apiresource.Quantity, values []apiresource.Quantity, policyPath *field.Path) field.ErrorList {
	fldPath := policyPath.Child("validValues")
	if len(values) > resourceapi.DeviceCapacityValidValuesMaxSize {
		return field.ErrorList{field.TooMany(fldPath, len(values), resourceapi.DeviceCapacityValidValuesMaxSize)}
	}
	key := func(q apiresource.Quantity) string { return strconv.FormatInt(q.Value(), 10) }
	if features.Enabled(features.DRAFractionalCapacityRange) {
		key = func(q apiresource.Quantity) string { return q.AsDec().String() }
	}
	var allErrs field.ErrorList
	foundDefault := false
	seen := make(map[string]bool, len(values))
	for i, value := range values {
		if i > 0 && value.Cmp(values[i-1]) < 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), value.String(), "values must be sorted in ascending order"))
		}
		if k := key(value); seen[k] {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), value.String()))
		} else {
			seen[k] = true
		}
		if value.Cmp(capacity) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), value.String(), "must not be larger than the capacity value "+capacity.String()))
		}
		if value.Cmp(defaultValue) == 0 {
			foundDefault = true
		}
	}
	if !foundDefault {
		// Reported at validValues, as upstream does.
		allErrs = append(allErrs, field.Invalid(fldPath, defaultValue.String(), "the default ("+defaultValue.String()+") must be one of validValues"))
	}
	return allErrs
}

// validateValidRange: min <= default <= max <= capacity, step > 0, and
// default and max reachable from min in whole steps, counted in the units
// rangeUsesMilli picks. As upstream, an error about the default is
// reported at validRange.default, and a default or max off the step at
// validRange.step.
func validateValidRange(capacity, defaultValue apiresource.Quantity, valueRange resourceapi.CapacityRequestPolicyRange, policyPath *field.Path) field.ErrorList {
	fldPath := policyPath.Child("validRange")
	defaultPath := fldPath.Child("default")
	if valueRange.Min == nil {
		return field.ErrorList{field.Required(fldPath.Child("min"), "required when validRange is set")}
	}
	minValue := *valueRange.Min
	var allErrs field.ErrorList
	if minValue.Cmp(capacity) > 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("min"), minValue.String(), "must not be larger than the capacity value "+capacity.String()))
	}
	if defaultValue.Cmp(minValue) < 0 {
		allErrs = append(allErrs, field.Invalid(defaultPath, defaultValue.String(), "must not be less than min "+minValue.String()))
	}
	if valueRange.Max != nil {
		maxValue := *valueRange.Max
		if minValue.Cmp(maxValue) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("max"), maxValue.String(), "must not be less than min "+minValue.String()))
		}
		if maxValue.Cmp(capacity) > 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("max"), maxValue.String(), "must not be larger than the capacity value "+capacity.String()))
		}
		if defaultValue.Cmp(maxValue) > 0 {
			allErrs = append(allErrs, field.Invalid(defaultPath, defaultValue.String(), "must not be larger than max "+maxValue.String()))
		}
	}
	useMilli := rangeUsesMilli(defaultValue, valueRange)
	if useMilli {
		// Milli-units must hold every value exactly, or the step check
		// below would compare rounded numbers.
		if errs := notMilli(defaultValue, valueRange, defaultPath, fldPath); len(errs) > 0 {
			return append(allErrs, errs...)
		}
	}
	if valueRange.Step == nil {
		return allErrs
	}
	step := *valueRange.Step
	stepPath := fldPath.Child("step")
	if step.Sign() <= 0 {
		return append(allErrs, field.Invalid(stepPath, step.String(), "must be greater than zero"))
	}
	oneStep := minValue.DeepCopy()
	oneStep.Add(step)
	if oneStep.Cmp(capacity) > 0 {
		allErrs = append(allErrs, field.Invalid(stepPath, step.String(), fmt.Sprintf("min plus one step (%s) must not be larger than the capacity value %s", oneStep.String(), capacity.String())))
	}
	if !useMilli {
		// Quantity.Value() is only meaningful in [0, MaxInt64].
		if errs := notInt64(defaultValue, valueRange, defaultPath, fldPath); len(errs) > 0 {
			return append(allErrs, errs...)
		}
	}
	units := func(q apiresource.Quantity) int64 { return q.Value() }
	if useMilli {
		units = func(q apiresource.Quantity) int64 { return q.MilliValue() }
	}
	checkMultiple := func(name string, value apiresource.Quantity) {
		if (units(value)-units(minValue))%units(step) != 0 {
			allErrs = append(allErrs, field.Invalid(stepPath, value.String(), fmt.Sprintf("%s (%s) must be min (%s) plus a multiple of step (%s)", name, value.String(), minValue.String(), step.String())))
		}
	}
	checkMultiple("default", defaultValue)
	if valueRange.Max != nil {
		checkMultiple("max", *valueRange.Max)
	}
	return allErrs
}

// rangeUsesMilli tells how a range's step is checked, as upstream: in
// milli-units when DRAFractionalCapacityRange is on and the default or a
// value of the range has a fraction; otherwise on the integers that
// Quantity.Value() rounds them up to, so that with the gate off a step of
// 250m counts as 1.
func rangeUsesMilli(defaultValue apiresource.Quantity, valueRange resourceapi.CapacityRequestPolicyRange) bool {
	if !features.Enabled(features.DRAFractionalCapacityRange) {
		return false
	}
	for _, q := range []*apiresource.Quantity{&defaultValue, valueRange.Min, valueRange.Max, valueRange.Step} {
		if q != nil && isFractional(*q) {
			return true
		}
	}
	return false
}

// isFractional reports whether q is not a whole number.
func isFractional(q apiresource.Quantity) bool {
	d := q.AsDec()
	if d.Scale() <= 0 {
		return false
	}
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)
	return new(big.Int).Rem(d.UnscaledBig(), unit).Sign() != 0
}

// rangeValues names the default and the set values of a range.
func rangeValues(defaultValue apiresource.Quantity, valueRange resourceapi.CapacityRequestPolicyRange, defaultPath, rangePath *field.Path) map[*field.Path]apiresource.Quantity {
	values := map[*field.Path]apiresource.Quantity{defaultPath: defaultValue}
	for name, q := range map[string]*apiresource.Quantity{"min": valueRange.Min, "max": valueRange.Max, "step": valueRange.Step} {
		if q != nil {
			values[rangePath.Child(name)] = *q
		}
	}
	return values
}

// notMilli reports the values that milli-units cannot hold exactly.
func notMilli(defaultValue apiresource.Quantity, valueRange resourceapi.CapacityRequestPolicyRange, defaultPath, rangePath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for path, q := range rangeValues(defaultValue, valueRange, defaultPath, rangePath) {
		if apiresource.NewMilliQuantity(q.MilliValue(), q.Format).Cmp(q) != 0 {
			allErrs = append(allErrs, field.Invalid(path, q.String(), "must be a multiple of 0.001 and not larger than "+strconv.FormatInt(math.MaxInt64/1000, 10)+" when a value of the range has a fraction"))
		}
	}
	return sortedErrors(allErrs)
}

// notInt64 reports the values outside [0, MaxInt64], where Quantity.Value()
// wraps or, for some negative values, rounds the wrong way.
func notInt64(defaultValue apiresource.Quantity, valueRange resourceapi.CapacityRequestPolicyRange, defaultPath, rangePath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for path, q := range rangeValues(defaultValue, valueRange, defaultPath, rangePath) {
		switch {
		case q.Sign() < 0:
			allErrs = append(allErrs, field.Invalid(path, q.String(), apimachineryvalidation.IsNegativeErrorMsg))
		case q.CmpInt64(math.MaxInt64) > 0:
			allErrs = append(allErrs, field.Invalid(path, q.String(), "must not be larger than "+strconv.FormatInt(math.MaxInt64, 10)+" when a step is set"))
		}
	}
	return sortedErrors(allErrs)
}

// sortedErrors orders errors by field, so that what a client sees does not
// depend on map order.
func sortedErrors(errs field.ErrorList) field.ErrorList {
	slices.SortFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

// validateDeviceTaint checks a taint. oldTaint, if set, is the taint before
// an update: an unchanged effect is not checked again.
func validateDeviceTaint(taint resourceapi.DeviceTaint, oldTaint *resourceapi.DeviceTaint, fldPath *field.Path) field.ErrorList {
	allErrs := metav1validation.ValidateLabelName(taint.Key, fldPath.Child("key"))
	if taint.Value != "" {
		allErrs = append(allErrs, validateLabelValue(taint.Value, fldPath.Child("value"))...)
	}
	if oldTaint == nil || oldTaint.Effect != taint.Effect {
		switch {
		case taint.Effect == "":
			allErrs = append(allErrs, field.Required(fldPath.Child("effect"), ""))
		case !isValidTaintEffect(taint.Effect):
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("effect"), taint.Effect, validTaintEffects))
		}
	}
	return allErrs
}
