package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Validation of the fields that are alpha upstream at 1.37. They reach
// validation only while their feature gate is on (the strategies drop them
// otherwise), so the rules here do not look at the gates.

// notAllocatedYet is the message for alpha fields that are stored and
// validated upstream but whose allocation semantics this server does not
// implement: rather than allocate as if they were not there, it refuses
// them.
const notAllocatedYet = "not supported yet: this server's allocator does not implement it, and an allocation that ignored it could pick the wrong devices"

// validateSliceAlphaFields checks partitionTypeAttribute and
// skipNodeOperations of a slice spec.
func validateSliceAlphaFields(spec *resourceapi.ResourceSliceSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.PartitionTypeAttribute != nil {
		allErrs = append(allErrs, validatePartitionTypeAttribute(spec, fldPath)...)
	}
	return append(allErrs, validateSkipNodeOperations(spec.SkipNodeOperations, fldPath.Child("skipNodeOperations"))...)
}

// validatePartitionTypeAttribute: the slice must have devices that consume
// counters, and each of them carries the named attribute as a string (a
// name in the driver's own domain may be published without the domain).
func validatePartitionTypeAttribute(spec *resourceapi.ResourceSliceSpec, fldPath *field.Path) field.ErrorList {
	attrPath := fldPath.Child("partitionTypeAttribute")
	name := *spec.PartitionTypeAttribute
	if errs := validateFullyQualifiedName(name, attrPath); len(errs) > 0 {
		return errs
	}
	consumers := false
	var allErrs field.ErrorList
	bare, _ := strings.CutPrefix(string(name), spec.Driver+"/")
	for i, device := range spec.Devices {
		if len(device.ConsumesCounters) == 0 {
			continue
		}
		consumers = true
		path := fldPath.Child("devices").Index(i).Child("attributes").Key(string(name))
		attr, ok := device.Attributes[resourceapi.QualifiedName(name)]
		if !ok {
			attr, ok = device.Attributes[resourceapi.QualifiedName(bare)]
		}
		switch {
		case !ok:
			allErrs = append(allErrs, field.Required(path, "the device consumes counters and `partitionTypeAttribute` names this attribute"))
		case attr.StringValue == nil:
			allErrs = append(allErrs, field.Invalid(path, attributeKind(attr), "must be a string because `partitionTypeAttribute` names this attribute"))
		}
	}
	if !consumers {
		return field.ErrorList{field.Invalid(attrPath, string(name), "may only be set on a slice with devices that consume counters")}
	}
	return allErrs
}

func attributeKind(attr resourceapi.DeviceAttribute) string {
	switch {
	case attr.IntValue != nil:
		return "int"
	case attr.BoolValue != nil:
		return "bool"
	case attr.VersionValue != nil:
		return "version"
	case attr.IntValues != nil:
		return "ints"
	case attr.BoolValues != nil:
		return "bools"
	case attr.StringValues != nil:
		return "strings"
	case attr.VersionValues != nil:
		return "versions"
	}
	return "string"
}

// validateSkipNodeOperations: a set; NodePrepareResources may only be
// skipped together with NodeUnprepareResources (or "*"). Unknown values
// are allowed: nodes ignore them.
func validateSkipNodeOperations(ops []resourceapi.SkipNodeOperation, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[resourceapi.SkipNodeOperation]()
	for i, op := range ops {
		if seen.Has(op) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), op))
		}
		seen.Insert(op)
	}
	if seen.Has(resourceapi.SkipNodeOperationNodePrepareResources) &&
		!seen.Has(resourceapi.SkipNodeOperationNodeUnprepareResources) && !seen.Has(resourceapi.SkipNodeOperationAll) {
		allErrs = append(allErrs, field.Invalid(fldPath, ops, "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"))
	}
	return allErrs
}

// validateDeviceAlphaFields checks the alpha fields of one device:
// the number of attribute values, compatibilityGroups and
// nodeAllocatableResources. oldDevice is the device before an update (nil
// on create); fields this server refuses are refused only when newly set.
func validateDeviceAlphaFields(device resourceapi.Device, oldDevice *resourceapi.Device, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if n := attributeValues(device); n > resourceapi.ResourceSliceMaxAttributeValuesPerDevice {
		allErrs = append(allErrs, field.Invalid(fldPath, n,
			fmt.Sprintf("the total number of attribute values must not exceed %d", resourceapi.ResourceSliceMaxAttributeValuesPerDevice)))
	}
	for i, consumption := range device.ConsumesCounters {
		path := fldPath.Child("consumesCounters").Index(i).Child("compatibilityGroups")
		allErrs = append(allErrs, validateCompatibilityGroups(consumption.CompatibilityGroups, path)...)
		if len(consumption.CompatibilityGroups) > 0 && !oldHasCompatibilityGroups(oldDevice) {
			allErrs = append(allErrs, field.Forbidden(path, notAllocatedYet))
		}
	}
	nodeAllocPath := fldPath.Child("nodeAllocatableResources")
	allErrs = append(allErrs, validateNodeAllocatableResources(device.NodeAllocatableResources, device.Capacity, nodeAllocPath)...)
	if len(device.NodeAllocatableResources) > 0 && (oldDevice == nil || len(oldDevice.NodeAllocatableResources) == 0) {
		allErrs = append(allErrs, field.Forbidden(nodeAllocPath,
			"not supported yet: pods are placed here without accounting for node-allocatable resources (cpu, memory, hugepages), so the devices' share of them could not be honoured"))
	}
	return allErrs
}

func oldHasCompatibilityGroups(old *resourceapi.Device) bool {
	if old == nil {
		return false
	}
	for _, c := range old.ConsumesCounters {
		if len(c.CompatibilityGroups) > 0 {
			return true
		}
	}
	return false
}

// attributeValues counts a device's attribute values, every item of a list
// attribute separately.
func attributeValues(device resourceapi.Device) int {
	n := 0
	for _, attr := range device.Attributes {
		items := len(attr.IntValues) + len(attr.BoolValues) + len(attr.StringValues) + len(attr.VersionValues)
		n += max(items, 1)
	}
	return n
}

// validateCompatibilityGroups: at most 2, unique, each a DNS label.
func validateCompatibilityGroups(groups []string, fldPath *field.Path) field.ErrorList {
	return validateSet(groups, resourceapi.DeviceCompatibilityGroupsMaxSize, validateDNSLabel, stringKey, fldPath)
}

// isNodeAllocatableResourceName: cpu, memory and hugepages-<size>, as
// upstream's core helper.
func isNodeAllocatableResourceName(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func validateNodeAllocatableResources(resources map[corev1.ResourceName]resourceapi.NodeAllocatableResource,
	capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for name, res := range resources {
		keyPath := fldPath.Key(string(name))
		if !isNodeAllocatableResourceName(name) {
			allErrs = append(allErrs, field.Invalid(keyPath, name, "must be a node allocatable resource name (cpu, memory or hugepages-<size>)"))
		}
		if res.Mapping == nil && res.Overhead == nil {
			allErrs = append(allErrs, field.Required(keyPath, "at least one of mapping or overhead must be set"))
		}
		if res.Mapping != nil {
			allErrs = append(allErrs, validateNodeAllocatableMapping(res.Mapping, capacity, keyPath.Child("mapping"))...)
		}
		if res.Overhead != nil {
			allErrs = append(allErrs, validateNodeAllocatableOverhead(res.Overhead, keyPath.Child("overhead"))...)
		}
	}
	return allErrs
}

func validateNodeAllocatableMapping(mapping *resourceapi.NodeAllocatableMapping,
	capacity map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if mapping.CapacityKey != nil {
		keyPath := fldPath.Child("capacityKey")
		if *mapping.CapacityKey == "" {
			allErrs = append(allErrs, field.Invalid(keyPath, "", "must not be empty"))
		} else if _, ok := capacity[*mapping.CapacityKey]; !ok {
			allErrs = append(allErrs, field.NotFound(keyPath, *mapping.CapacityKey))
		}
		if mapping.CapacityMultiplier == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("capacityMultiplier"), "required when capacityKey is set"))
		}
	}
	if mapping.CapacityMultiplier != nil {
		if mapping.CapacityKey == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("capacityKey"), "required when capacityMultiplier is set"))
		}
		allErrs = append(allErrs, positive(mapping.CapacityMultiplier, fldPath.Child("capacityMultiplier"))...)
	}
	if mapping.DeviceMultiplier != nil {
		allErrs = append(allErrs, positive(mapping.DeviceMultiplier, fldPath.Child("deviceMultiplier"))...)
	}
	return allErrs
}

func positive(q *apiresource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be positive")}
	}
	return nil
}

func validateNodeAllocatableOverhead(overhead *resourceapi.NodeAllocatableOverhead, fldPath *field.Path) field.ErrorList {
	if overhead.PerPod == nil && overhead.PerContainer == nil {
		return field.ErrorList{field.Invalid(fldPath, "", "at least one of perPod or perContainer must be set")}
	}
	var allErrs field.ErrorList
	if overhead.PerPod != nil && overhead.PerPod.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("perPod"), overhead.PerPod.String(), "must be non-negative"))
	}
	if overhead.PerContainer != nil && overhead.PerContainer.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("perContainer"), overhead.PerContainer.String(), "must be non-negative"))
	}
	return allErrs
}

// validateListAttribute checks the list values of an attribute; it
// returns how many of the value fields (ints, bools, strings, versions)
// are set, for the exactly-one rule.
func validateListAttribute(attribute resourceapi.DeviceAttribute, fldPath *field.Path) (int, field.ErrorList) {
	var allErrs field.ErrorList
	set := 0
	nonEmpty := func(n int, isSet bool, name string) {
		if !isSet {
			return
		}
		set++
		if n == 0 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child(name), "[]", "must not be empty if specified"))
		}
	}
	nonEmpty(len(attribute.IntValues), attribute.IntValues != nil, "ints")
	nonEmpty(len(attribute.BoolValues), attribute.BoolValues != nil, "bools")
	nonEmpty(len(attribute.StringValues), attribute.StringValues != nil, "strings")
	nonEmpty(len(attribute.VersionValues), attribute.VersionValues != nil, "versions")
	for i, s := range attribute.StringValues {
		if len(s) > resourceapi.DeviceAttributeMaxValueLength {
			allErrs = append(allErrs, field.TooLong(fldPath.Child("strings").Index(i), "", resourceapi.DeviceAttributeMaxValueLength))
		}
	}
	for i, v := range attribute.VersionValues {
		allErrs = append(allErrs, validateVersionValue(v, fldPath.Child("versions").Index(i))...)
	}
	return set, allErrs
}

// validateDerivedAttributes checks the derived attributes of every exact
// request and subrequest of a claim: at most 32 per request, unique fully
// qualified names that a matchAttribute or distinctAttribute constraint of
// the request uses, and a non-empty expression of at most 10 Ki. Derived
// attributes are then refused: the allocator does not compute them. (The
// spec of claims and templates is immutable, so no stored object can have
// them.)
func validateDerivedAttributes(claim *resourceapi.DeviceClaim, fldPath *field.Path) field.ErrorList {
	used := constraintAttributes(claim.Constraints)
	var allErrs field.ErrorList
	check := func(attrs []resourceapi.DeviceDerivedAttribute, request string, path *field.Path) {
		if attrs == nil {
			return
		}
		allErrs = append(allErrs, validateSet(attrs, resourceapi.DeviceDerivedAttributesMaxSize,
			func(attr resourceapi.DeviceDerivedAttribute, path *field.Path) field.ErrorList {
				return validateDerivedAttribute(attr, request, used, path)
			},
			func(attr resourceapi.DeviceDerivedAttribute) resourceapi.FullyQualifiedName { return attr.Name }, path)...)
		if len(attrs) > 0 {
			allErrs = append(allErrs, field.Forbidden(path, notAllocatedYet))
		}
	}
	for i, request := range claim.Requests {
		requestPath := fldPath.Child("requests").Index(i)
		if request.Exactly != nil {
			check(request.Exactly.DerivedAttributes, request.Name, requestPath.Child("exactly", "derivedAttributes"))
		}
		for j, sub := range request.FirstAvailable {
			check(sub.DerivedAttributes, request.Name+"/"+sub.Name, requestPath.Child("firstAvailable").Index(j).Child("derivedAttributes"))
		}
	}
	return allErrs
}

// constraintAttributes maps a request name ("" for constraints over every
// request) to the attributes its constraints compare.
func constraintAttributes(constraints []resourceapi.DeviceConstraint) map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	add := func(request, attr string) {
		if out[request] == nil {
			out[request] = sets.New[string]()
		}
		out[request].Insert(attr)
	}
	for _, c := range constraints {
		var attr string
		switch {
		case c.MatchAttribute != nil:
			attr = string(*c.MatchAttribute)
		case c.DistinctAttribute != nil:
			attr = string(*c.DistinctAttribute)
		default:
			continue
		}
		if len(c.Requests) == 0 {
			add("", attr)
		}
		for _, r := range c.Requests {
			add(r, attr)
		}
	}
	return out
}

func validateDerivedAttribute(attr resourceapi.DeviceDerivedAttribute, request string, used map[string]sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	namePath := fldPath.Child("name")
	if attr.Name == "" {
		allErrs = append(allErrs, field.Required(namePath, ""))
	} else {
		allErrs = append(allErrs, validateFullyQualifiedName(attr.Name, namePath)...)
		parent, _, _ := strings.Cut(request, "/")
		name := string(attr.Name)
		if !used[""].Has(name) && !used[request].Has(name) && !used[parent].Has(name) {
			allErrs = append(allErrs, field.Invalid(namePath, name, "must be referenced by at least one matchAttribute or distinctAttribute constraint targeting this request"))
		}
	}
	exprPath := fldPath.Child("expression")
	switch {
	case attr.Expression == "":
		allErrs = append(allErrs, field.Required(exprPath, ""))
	case len(attr.Expression) > resourceapi.CELSelectorExpressionMaxLength:
		allErrs = append(allErrs, field.TooLong(exprPath, "", resourceapi.CELSelectorExpressionMaxLength))
	}
	return allErrs
}
