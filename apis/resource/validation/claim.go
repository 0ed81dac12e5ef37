package validation

import (
	"errors"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"

	resourceapi "github.com/draplane/draplane/apis/resource"
	dracel "github.com/draplane/draplane/internal/cel"
)

// storedExpressions holds the CEL expressions of the object as it was
// stored before an update. They passed validation when written; checking
// them again could reject an unchanged object only because the CEL
// libraries or cost estimates changed, so they are not checked again.
type storedExpressions sets.Set[string]

func (s storedExpressions) has(expression string) bool {
	return s != nil && sets.Set[string](s).Has(expression)
}

func validateSelectors(selectors []resourceapi.DeviceSelector, fldPath *field.Path, stored storedExpressions) field.ErrorList {
	return validateSlice(selectors, resourceapi.DeviceSelectorsMaxSize,
		func(selector resourceapi.DeviceSelector, fldPath *field.Path) field.ErrorList {
			if selector.CEL == nil {
				return field.ErrorList{field.Required(fldPath.Child("cel"), "")}
			}
			return validateCELExpression(selector.CEL.Expression, fldPath.Child("cel", "expression"), stored)
		}, fldPath)
}

// validateCELExpression compiles a selector with the device environment.
// New expressions use the NewExpressions environment, so that an object
// accepted now still compiles on the previous release.
func validateCELExpression(expression string, fldPath *field.Path, stored storedExpressions) field.ErrorList {
	if stored.has(expression) {
		return nil
	}
	if expression == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		// Not compiled at all: that is the expensive part.
		return field.ErrorList{field.TooLong(fldPath, "", resourceapi.CELSelectorExpressionMaxLength)}
	}
	result := dracel.GetCompiler().CompileForValidation(expression)
	if result.Error == nil {
		return nil
	}
	celErr := result.Error
	switch {
	case errors.Is(celErr, dracel.ErrTooExpensive):
		return field.ErrorList{field.Forbidden(fldPath, celErr.Detail)}
	case errors.Is(celErr, dracel.ErrTooLong):
		return field.ErrorList{field.TooLong(fldPath, "", resourceapi.CELSelectorExpressionMaxLength)}
	case celErr.Type == apiservercel.ErrorTypeRequired:
		return field.ErrorList{field.Required(fldPath, celErr.Detail)}
	case celErr.Type == apiservercel.ErrorTypeInvalid:
		return field.ErrorList{field.Invalid(fldPath, expression, celErr.Detail)}
	default:
		return field.ErrorList{field.InternalError(fldPath, celErr)}
	}
}

// requestNames maps each request name to the names of its subrequests (nil
// for a request with `exactly`), so that references like "req" and
// "req/sub" can be checked.
type requestNames map[string]sets.Set[string]

func gatherRequestNames(claim *resourceapi.DeviceClaim) requestNames {
	names := make(requestNames, len(claim.Requests))
	for _, request := range claim.Requests {
		if len(request.FirstAvailable) == 0 {
			names[request.Name] = nil
			continue
		}
		subs := sets.New[string]()
		for _, sub := range request.FirstAvailable {
			subs.Insert(sub.Name)
		}
		names[request.Name] = subs
	}
	return names
}

func (r requestNames) has(reference string) bool {
	request, sub, isSub := strings.Cut(reference, "/")
	subs, found := r[request]
	if !found {
		return false
	}
	return !isSub || subs.Has(sub)
}

// validateRequestReference checks a name in constraints, config or
// allocation results: "<request>" or "<request>/<subrequest>" of this claim.
func validateRequestReference(reference string, fldPath *field.Path, names requestNames) field.ErrorList {
	const msg = "must be the name of a request in the claim, or of a request and one of its subrequests separated by '/'"
	segments := strings.Split(reference, "/")
	if len(segments) > 2 {
		return field.ErrorList{field.Invalid(fldPath, reference, msg)}
	}
	var allErrs field.ErrorList
	for _, segment := range segments {
		allErrs = append(allErrs, validateRequestName(segment, fldPath)...)
	}
	if len(allErrs) == 0 && !names.has(reference) {
		allErrs = append(allErrs, field.Invalid(fldPath, reference, msg))
	}
	return allErrs
}

func validateRequestReferences(references []string, fldPath *field.Path, names requestNames) field.ErrorList {
	return validateSet(references, resourceapi.DeviceRequestsMaxSize,
		func(reference string, fldPath *field.Path) field.ErrorList {
			return validateRequestReference(reference, fldPath, names)
		}, stringKey, fldPath)
}

func validateResourceClaimSpec(spec *resourceapi.ResourceClaimSpec, fldPath *field.Path) field.ErrorList {
	return validateDeviceClaim(&spec.Devices, fldPath.Child("devices"))
}

func validateDeviceClaim(claim *resourceapi.DeviceClaim, fldPath *field.Path) field.ErrorList {
	names := gatherRequestNames(claim)
	allErrs := validateSet(claim.Requests, resourceapi.DeviceRequestsMaxSize, validateDeviceRequest,
		func(request resourceapi.DeviceRequest) string { return request.Name }, fldPath.Child("requests"))
	allErrs = append(allErrs, validateSlice(claim.Constraints, resourceapi.DeviceConstraintsMaxSize,
		func(constraint resourceapi.DeviceConstraint, fldPath *field.Path) field.ErrorList {
			return validateDeviceConstraint(constraint, fldPath, names)
		}, fldPath.Child("constraints"))...)
	allErrs = append(allErrs, validateSlice(claim.Config, resourceapi.DeviceConfigMaxSize,
		func(config resourceapi.DeviceClaimConfiguration, fldPath *field.Path) field.ErrorList {
			errs := validateRequestReferences(config.Requests, fldPath.Child("requests"), names)
			return append(errs, validateDeviceConfiguration(config.DeviceConfiguration, fldPath, false)...)
		}, fldPath.Child("config"))...)
	return append(allErrs, validateDerivedAttributes(claim, fldPath)...)
}

// exactlyAndFirstAvailableMessage also speaks to v1beta1 users: there the
// `exactly` fields sit directly in the request, and a request that mixes
// them with firstAvailable arrives here with both set.
const exactlyAndFirstAvailableMessage = "exactly (the flat deviceClassName/selectors/count fields in v1beta1) and firstAvailable are mutually exclusive"

func validateDeviceRequest(request resourceapi.DeviceRequest, fldPath *field.Path) field.ErrorList {
	allErrs := validateRequestName(request.Name, fldPath.Child("name"))
	hasExactly, hasFirstAvailable := request.Exactly != nil, len(request.FirstAvailable) > 0
	switch {
	case hasExactly && hasFirstAvailable:
		allErrs = append(allErrs, field.Invalid(fldPath, request.Name, exactlyAndFirstAvailableMessage))
	case hasExactly:
		allErrs = append(allErrs, validateExactDeviceRequest(request.Exactly, fldPath.Child("exactly"))...)
	case hasFirstAvailable:
		allErrs = append(allErrs, validateSet(request.FirstAvailable, resourceapi.FirstAvailableDeviceRequestMaxSize, validateDeviceSubRequest,
			func(sub resourceapi.DeviceSubRequest) string { return sub.Name }, fldPath.Child("firstAvailable"))...)
	default:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of `exactly` or `firstAvailable` is required"))
	}
	return allErrs
}

func validateExactDeviceRequest(request *resourceapi.ExactDeviceRequest, fldPath *field.Path) field.ErrorList {
	allErrs := validateDeviceClassName(request.DeviceClassName, fldPath.Child("deviceClassName"))
	allErrs = append(allErrs, validateSelectors(request.Selectors, fldPath.Child("selectors"), nil)...)
	allErrs = append(allErrs, validateAllocationMode(request.AllocationMode, request.Count, fldPath)...)
	allErrs = append(allErrs, validateTolerations(request.Tolerations, fldPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateCapacityRequirements(request.Capacity, fldPath.Child("capacity"))...)
	return allErrs
}

func validateDeviceSubRequest(sub resourceapi.DeviceSubRequest, fldPath *field.Path) field.ErrorList {
	allErrs := validateRequestName(sub.Name, fldPath.Child("name"))
	allErrs = append(allErrs, validateDeviceClassName(sub.DeviceClassName, fldPath.Child("deviceClassName"))...)
	allErrs = append(allErrs, validateSelectors(sub.Selectors, fldPath.Child("selectors"), nil)...)
	allErrs = append(allErrs, validateAllocationMode(sub.AllocationMode, sub.Count, fldPath)...)
	allErrs = append(allErrs, validateTolerations(sub.Tolerations, fldPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateCapacityRequirements(sub.Capacity, fldPath.Child("capacity"))...)
	return allErrs
}

var validAllocationModes = []resourceapi.DeviceAllocationMode{resourceapi.DeviceAllocationModeAll, resourceapi.DeviceAllocationModeExactCount}

// validateAllocationMode: ExactCount needs a positive count; All takes
// every matching device, so a count would be meaningless.
func validateAllocationMode(mode resourceapi.DeviceAllocationMode, count int64, requestPath *field.Path) field.ErrorList {
	countPath := requestPath.Child("count")
	switch mode {
	case resourceapi.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(countPath, count, "must be greater than zero")}
		}
	case resourceapi.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(countPath, count, "must not be specified when allocationMode is 'All'")}
		}
	case "":
		return field.ErrorList{field.Required(requestPath.Child("allocationMode"), "")}
	default:
		return field.ErrorList{field.NotSupported(requestPath.Child("allocationMode"), mode, validAllocationModes)}
	}
	return nil
}

func validateCapacityRequirements(capacity *resourceapi.CapacityRequirements, fldPath *field.Path) field.ErrorList {
	if capacity == nil {
		return nil
	}
	var allErrs field.ErrorList
	requestsPath := fldPath.Child("requests")
	for name, quantity := range capacity.Requests {
		keyPath := requestsPath.Key(string(name))
		allErrs = append(allErrs, validateQualifiedName(name, keyPath)...)
		if quantity.Sign() < 0 {
			allErrs = append(allErrs, field.Invalid(keyPath, quantity.String(), "must not be negative"))
		}
	}
	return allErrs
}

var (
	validTolerationOperators = []resourceapi.DeviceTolerationOperator{resourceapi.DeviceTolerationOpEqual, resourceapi.DeviceTolerationOpExists}
	validTaintEffects        = []resourceapi.DeviceTaintEffect{resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNone}
)

func validateTolerations(tolerations []resourceapi.DeviceToleration, fldPath *field.Path) field.ErrorList {
	return validateSlice(tolerations, resourceapi.DeviceTolerationsMaxLength, validateToleration, fldPath)
}

func validateToleration(toleration resourceapi.DeviceToleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if toleration.Key != "" {
		allErrs = append(allErrs, metav1validation.ValidateLabelName(toleration.Key, fldPath.Child("key"))...)
	}
	switch toleration.Operator {
	case resourceapi.DeviceTolerationOpExists:
		if toleration.Value != "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("value"), toleration.Value, "must be empty for operator `Exists`"))
		}
	case resourceapi.DeviceTolerationOpEqual:
		allErrs = append(allErrs, validateLabelValue(toleration.Value, fldPath.Child("value"))...)
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("operator"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("operator"), toleration.Operator, validTolerationOperators))
	}
	if toleration.Effect != "" && !isValidTaintEffect(toleration.Effect) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("effect"), toleration.Effect, validTaintEffects))
	}
	return allErrs
}

func isValidTaintEffect(effect resourceapi.DeviceTaintEffect) bool {
	for _, valid := range validTaintEffects {
		if effect == valid {
			return true
		}
	}
	return false
}

func validateDeviceConstraint(constraint resourceapi.DeviceConstraint, fldPath *field.Path, names requestNames) field.ErrorList {
	allErrs := validateRequestReferences(constraint.Requests, fldPath.Child("requests"), names)
	switch {
	case constraint.MatchAttribute != nil && constraint.DistinctAttribute != nil:
		allErrs = append(allErrs, field.Invalid(fldPath, "{`matchAttribute`, `distinctAttribute`}",
			"exactly one of `matchAttribute` or `distinctAttribute` is required, but multiple fields are set"))
	case constraint.MatchAttribute != nil:
		allErrs = append(allErrs, validateFullyQualifiedName(*constraint.MatchAttribute, fldPath.Child("matchAttribute"))...)
	case constraint.DistinctAttribute != nil:
		allErrs = append(allErrs, validateFullyQualifiedName(*constraint.DistinctAttribute, fldPath.Child("distinctAttribute"))...)
	default:
		allErrs = append(allErrs, field.Required(fldPath, "exactly one of `matchAttribute` or `distinctAttribute` is required"))
	}
	return allErrs
}

// validateDeviceConfiguration checks the one kind of configuration there
// is. stored skips the size limit for configuration that is unchanged since
// it was stored.
func validateDeviceConfiguration(config resourceapi.DeviceConfiguration, fldPath *field.Path, stored bool) field.ErrorList {
	if config.Opaque == nil {
		return field.ErrorList{field.Required(fldPath.Child("opaque"), "")}
	}
	opaquePath := fldPath.Child("opaque")
	allErrs := validateDriverName(config.Opaque.Driver, opaquePath.Child("driver"))
	return append(allErrs, validateRawJSONObject(config.Opaque.Parameters, opaquePath.Child("parameters"), stored, resourceapi.OpaqueParametersMaxLength)...)
}

func validateResourceClaimStatusUpdate(claim, old *resourceapi.ResourceClaim) field.ErrorList {
	fldPath := field.NewPath("status")
	status, oldStatus := &claim.Status, &old.Status
	reservedForPath := fldPath.Child("reservedFor")

	allErrs := validateSet(status.ReservedFor, resourceapi.ResourceClaimReservedForMaxSize, validateConsumerReference,
		func(consumer resourceapi.ResourceClaimConsumerReference) types.UID { return consumer.UID }, reservedForPath)
	if len(status.ReservedFor) > 0 {
		if status.Allocation == nil {
			allErrs = append(allErrs, field.Forbidden(reservedForPath, "may not be set while the claim is not allocated"))
		} else if claim.DeletionTimestamp != nil {
			// A claim being deleted may lose consumers, but gain none:
			// otherwise deallocation could be postponed forever.
			oldUIDs := sets.New[types.UID]()
			for _, consumer := range oldStatus.ReservedFor {
				oldUIDs.Insert(consumer.UID)
			}
			for i, consumer := range status.ReservedFor {
				if !oldUIDs.Has(consumer.UID) {
					allErrs = append(allErrs, field.Forbidden(reservedForPath.Index(i), "new entries may not be added while the claim is being deleted"))
				}
			}
		}
	}

	allocationPath := fldPath.Child("allocation")
	switch {
	case oldStatus.Allocation != nil && status.Allocation != nil:
		// Once set, an allocation only goes away as a whole; an unchanged
		// one is not validated again, since rules for new allocations
		// may have become stricter.
		allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(status.Allocation, oldStatus.Allocation, allocationPath)...)
	case status.Allocation != nil:
		allErrs = append(allErrs, validateAllocationResult(status.Allocation, allocationPath, gatherRequestNames(&claim.Spec.Devices))...)
	}

	allocated := sets.New[string]()
	if status.Allocation != nil {
		for _, result := range status.Allocation.Devices.Results {
			allocated.Insert(deviceKey(result.Driver, result.Pool, result.Device, (*string)(result.ShareID)))
		}
	}
	allErrs = append(allErrs, validateSet(status.Devices, -1,
		func(device resourceapi.AllocatedDeviceStatus, fldPath *field.Path) field.ErrorList {
			return validateAllocatedDeviceStatus(device, fldPath, allocated)
		},
		func(device resourceapi.AllocatedDeviceStatus) string {
			return deviceKey(device.Driver, device.Pool, device.Device, device.ShareID)
		}, fldPath.Child("devices"))...)
	return allErrs
}

// deviceKey identifies one allocation of a device; shareID separates
// allocations of a device that allows several.
func deviceKey(driver, pool, device string, shareID *string) string {
	key := driver + "/" + pool + "/" + device
	if shareID != nil {
		key += "/" + *shareID
	}
	return key
}

func validateConsumerReference(consumer resourceapi.ResourceClaimConsumerReference, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if consumer.Resource == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("resource"), ""))
	}
	if consumer.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	}
	if consumer.UID == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("uid"), ""))
	}
	return allErrs
}

func validateAllocationResult(allocation *resourceapi.AllocationResult, fldPath *field.Path, names requestNames) field.ErrorList {
	devicesPath := fldPath.Child("devices")
	allErrs := validateSlice(allocation.Devices.Results, resourceapi.AllocationResultsMaxSize,
		func(result resourceapi.DeviceRequestAllocationResult, fldPath *field.Path) field.ErrorList {
			return validateDeviceRequestAllocationResult(result, fldPath, names)
		}, devicesPath.Child("results"))
	// Class configuration and claim configuration end up side by side.
	allErrs = append(allErrs, validateSlice(allocation.Devices.Config, 2*resourceapi.DeviceConfigMaxSize,
		func(config resourceapi.DeviceAllocationConfiguration, fldPath *field.Path) field.ErrorList {
			var errs field.ErrorList
			switch config.Source {
			case resourceapi.AllocationConfigSourceClass, resourceapi.AllocationConfigSourceClaim:
			case "":
				errs = append(errs, field.Required(fldPath.Child("source"), ""))
			default:
				errs = append(errs, field.NotSupported(fldPath.Child("source"), config.Source,
					[]resourceapi.AllocationConfigSource{resourceapi.AllocationConfigSourceClaim, resourceapi.AllocationConfigSourceClass}))
			}
			errs = append(errs, validateRequestReferences(config.Requests, fldPath.Child("requests"), names)...)
			return append(errs, validateDeviceConfiguration(config.DeviceConfiguration, fldPath, false)...)
		}, devicesPath.Child("config"))...)
	if allocation.NodeSelector != nil {
		allErrs = append(allErrs, ValidateNodeSelector(allocation.NodeSelector, false, fldPath.Child("nodeSelector"))...)
	}
	return allErrs
}

func validateDeviceRequestAllocationResult(result resourceapi.DeviceRequestAllocationResult, fldPath *field.Path, names requestNames) field.ErrorList {
	allErrs := validateRequestReference(result.Request, fldPath.Child("request"), names)
	allErrs = append(allErrs, validateDriverName(result.Driver, fldPath.Child("driver"))...)
	allErrs = append(allErrs, validatePoolName(result.Pool, fldPath.Child("pool"))...)
	allErrs = append(allErrs, validateDeviceName(result.Device, fldPath.Child("device"))...)
	allErrs = append(allErrs, validateBindingConditions(result.BindingConditions, result.BindingFailureConditions, fldPath)...)
	allErrs = append(allErrs, validateTolerations(result.Tolerations, fldPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateSkipNodeOperations(result.SkipNodeOperations, fldPath.Child("skipNodeOperations"))...)
	if result.ShareID != nil {
		allErrs = append(allErrs, validateUID(string(*result.ShareID), fldPath.Child("shareID"))...)
	}
	consumedPath := fldPath.Child("consumedCapacity")
	for name, quantity := range result.ConsumedCapacity {
		allErrs = append(allErrs, validateQualifiedName(name, consumedPath.Key(string(name)))...)
		if quantity.Sign() < 0 {
			allErrs = append(allErrs, field.Invalid(consumedPath.Key(string(name)), quantity.String(), "must not be negative"))
		}
	}
	return allErrs
}

func validateAllocatedDeviceStatus(device resourceapi.AllocatedDeviceStatus, fldPath *field.Path, allocated sets.Set[string]) field.ErrorList {
	allErrs := validateDriverName(device.Driver, fldPath.Child("driver"))
	allErrs = append(allErrs, validatePoolName(device.Pool, fldPath.Child("pool"))...)
	allErrs = append(allErrs, validateDeviceName(device.Device, fldPath.Child("device"))...)
	if device.ShareID != nil {
		allErrs = append(allErrs, validateUID(*device.ShareID, fldPath.Child("shareID"))...)
	}
	key := deviceKey(device.Driver, device.Pool, device.Device, device.ShareID)
	if !allocated.Has(key) {
		allErrs = append(allErrs, field.Invalid(fldPath, key, "must be an allocated device in the claim"))
	}
	allErrs = append(allErrs, validateConditions(device.Conditions, allocatedDeviceStatusMaxConditions, fldPath.Child("conditions"))...)
	if device.Data != nil && len(device.Data.Raw) > 0 {
		allErrs = append(allErrs, validateRawJSONObject(*device.Data, fldPath.Child("data"), false, allocatedDeviceStatusDataMaxLength)...)
	}
	if data := device.NetworkData; data != nil {
		networkPath := fldPath.Child("networkData")
		if len(data.InterfaceName) > resourceapi.NetworkDeviceDataInterfaceNameMaxLength {
			allErrs = append(allErrs, field.TooLong(networkPath.Child("interfaceName"), "", resourceapi.NetworkDeviceDataInterfaceNameMaxLength))
		}
		if len(data.HardwareAddress) > resourceapi.NetworkDeviceDataHardwareAddressMaxLength {
			allErrs = append(allErrs, field.TooLong(networkPath.Child("hardwareAddress"), "", resourceapi.NetworkDeviceDataHardwareAddressMaxLength))
		}
		allErrs = append(allErrs, validateSet(data.IPs, resourceapi.NetworkDeviceDataMaxIPs, func(ip string, fldPath *field.Path) field.ErrorList {
			return utilvalidation.IsValidInterfaceAddress(fldPath, ip)
		}, stringKey, networkPath.Child("ips"))...)
	}
	return allErrs
}

// validateBindingConditions: at most 4 of each, label names, no
// duplicates, no type in both lists, and both lists or neither (a binding
// that can only succeed or only fail would wait forever).
func validateBindingConditions(conditions, failureConditions []string, fldPath *field.Path) field.ErrorList {
	conditionsPath, failurePath := fldPath.Child("bindingConditions"), fldPath.Child("bindingFailureConditions")
	allErrs := validateSet(conditions, resourceapi.BindingConditionsMaxSize, metav1validation.ValidateLabelName, stringKey, conditionsPath)
	allErrs = append(allErrs, validateSet(failureConditions, resourceapi.BindingFailureConditionsMaxSize, metav1validation.ValidateLabelName, stringKey, failurePath)...)
	success := sets.New(conditions...)
	for i, condition := range failureConditions {
		if success.Has(condition) {
			allErrs = append(allErrs, field.Invalid(failurePath.Index(i), condition, "must not also be listed in bindingConditions"))
		}
	}
	if len(conditions) == 0 && len(failureConditions) > 0 {
		allErrs = append(allErrs, field.Required(conditionsPath, "bindingConditions are required to use bindingFailureConditions"))
	}
	if len(failureConditions) == 0 && len(conditions) > 0 {
		allErrs = append(allErrs, field.Required(failurePath, "bindingFailureConditions are required to use bindingConditions"))
	}
	return allErrs
}

// validateTemplateObjectMeta allows only labels and annotations in a
// template's metadata: nothing else is copied into generated claims, so
// anything else would be silently ignored.
func validateTemplateObjectMeta(meta *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateAnnotations(meta.Annotations, fldPath.Child("annotations"))
	allErrs = append(allErrs, metav1validation.ValidateLabels(meta.Labels, fldPath.Child("labels"))...)
	forbid := func(set bool, name string) {
		if set {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "only labels and annotations may be set in a template"))
		}
	}
	forbid(meta.Name != "", "name")
	forbid(meta.GenerateName != "", "generateName")
	forbid(meta.Namespace != "", "namespace")
	forbid(meta.UID != "", "uid")
	forbid(meta.ResourceVersion != "", "resourceVersion")
	forbid(meta.Generation != 0, "generation")
	forbid(!meta.CreationTimestamp.IsZero(), "creationTimestamp")
	forbid(meta.DeletionTimestamp != nil, "deletionTimestamp")
	forbid(meta.DeletionGracePeriodSeconds != nil, "deletionGracePeriodSeconds")
	forbid(len(meta.OwnerReferences) > 0, "ownerReferences")
	forbid(len(meta.Finalizers) > 0, "finalizers")
	forbid(len(meta.ManagedFields) > 0, "managedFields")
	return allErrs
}
