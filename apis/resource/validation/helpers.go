package validation

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Limits upstream enforces that apis/resource/limits.go does not (yet)
// declare; kept here so validation matches upstream.
const (
	allocatedDeviceStatusMaxConditions = 8
	allocatedDeviceStatusDataMaxLength = 10 * 1024
)

// validateSlice rejects a list longer than maxSize without looking at its
// items (a huge list should cost nothing more), otherwise validates every
// item. A negative maxSize means no limit.
func validateSlice[T any](items []T, maxSize int, validateItem func(T, *field.Path) field.ErrorList, fldPath *field.Path) field.ErrorList {
	if maxSize >= 0 && len(items) > maxSize {
		return field.ErrorList{field.TooMany(fldPath, len(items), maxSize)}
	}
	var allErrs field.ErrorList
	for i, item := range items {
		allErrs = append(allErrs, validateItem(item, fldPath.Index(i))...)
	}
	return allErrs
}

// validateSet is validateSlice plus uniqueness by key: the second and later
// items with a key already seen are reported as duplicates.
func validateSet[T any, K comparable](items []T, maxSize int, validateItem func(T, *field.Path) field.ErrorList, key func(T) K, fldPath *field.Path) field.ErrorList {
	if maxSize >= 0 && len(items) > maxSize {
		return field.ErrorList{field.TooMany(fldPath, len(items), maxSize)}
	}
	var allErrs field.ErrorList
	seen := make(map[K]struct{}, len(items))
	for i, item := range items {
		allErrs = append(allErrs, validateItem(item, fldPath.Index(i))...)
		k := key(item)
		if _, dup := seen[k]; dup {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), k))
		}
		seen[k] = struct{}{}
	}
	return allErrs
}

// validateMap checks the size of a map, then each key and value. Errors
// about a key or its value name the key's path.
func validateMap[K ~string, T any](m map[K]T, maxSize int, validateKey func(K, *field.Path) field.ErrorList, validateValue func(T, *field.Path) field.ErrorList, fldPath *field.Path) field.ErrorList {
	if maxSize >= 0 && len(m) > maxSize {
		return field.ErrorList{field.TooMany(fldPath, len(m), maxSize)}
	}
	var allErrs field.ErrorList
	for key, value := range m {
		keyPath := fldPath.Key(string(key))
		allErrs = append(allErrs, validateKey(key, keyPath)...)
		if validateValue != nil {
			allErrs = append(allErrs, validateValue(value, keyPath)...)
		}
	}
	return allErrs
}

func stringKey(s string) string { return s }

func invalidMessages(fldPath *field.Path, value string, msgs []string) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range msgs {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateDNSLabel(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return invalidMessages(fldPath, name, utilvalidation.IsDNS1123Label(name))
}

func validateDNSSubdomain(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return invalidMessages(fldPath, name, utilvalidation.IsDNS1123Subdomain(name))
}

// Request, subrequest, device and counter names are DNS labels; class
// names and node names are DNS subdomains, like object names.
var (
	validateRequestName     = validateDNSLabel
	validateDeviceName      = validateDNSLabel
	validateCounterName     = validateDNSLabel
	validateDeviceClassName = validateDNSSubdomain
	validateNodeName        = validateDNSSubdomain
)

// validateDriverName accepts what Kubernetes accepts for CSI driver names
// (the same rules as upstream DRA): at most 63 characters, and a DNS
// subdomain when compared case-insensitively.
func validateDriverName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	if len(name) > resourceapi.DriverNameMaxLength {
		allErrs = append(allErrs, field.TooLong(fldPath, "", resourceapi.DriverNameMaxLength))
	}
	return append(allErrs, invalidMessages(fldPath, name, utilvalidation.IsDNS1123Subdomain(strings.ToLower(name)))...)
}

// validatePoolName: DNS subdomains joined by slashes, at most 253
// characters in total.
func validatePoolName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	if len(name) > resourceapi.PoolNameMaxLength {
		allErrs = append(allErrs, field.TooLong(fldPath, "", resourceapi.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		allErrs = append(allErrs, invalidMessages(fldPath, name, utilvalidation.IsDNS1123Subdomain(part))...)
	}
	return allErrs
}

// validateCIdentifier checks the identifier part of a qualified name.
func validateCIdentifier(id string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(id) > resourceapi.DeviceMaxIDLength {
		allErrs = append(allErrs, field.TooLong(fldPath, "", resourceapi.DeviceMaxIDLength))
	}
	return append(allErrs, invalidMessages(fldPath, id, utilvalidation.IsCIdentifier(id))...)
}

// validateQualifiedName accepts "<identifier>" and "<domain>/<identifier>",
// where the domain follows the driver name rules.
func validateQualifiedName(name resourceapi.QualifiedName, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	parts := strings.Split(string(name), "/")
	switch len(parts) {
	case 1:
		if name == "" {
			return field.ErrorList{field.Required(fldPath, "")}
		}
		allErrs = append(allErrs, validateCIdentifier(parts[0], fldPath)...)
	case 2:
		if parts[0] == "" {
			allErrs = append(allErrs, field.Invalid(fldPath, string(name), "the domain must not be empty"))
		} else {
			if len(parts[0]) > resourceapi.DeviceMaxDomainLength {
				allErrs = append(allErrs, field.TooLong(fldPath, "", resourceapi.DeviceMaxDomainLength))
			}
			allErrs = append(allErrs, invalidMessages(fldPath, string(name), utilvalidation.IsDNS1123Subdomain(strings.ToLower(parts[0])))...)
		}
		if parts[1] == "" {
			allErrs = append(allErrs, field.Invalid(fldPath, string(name), "the name must not be empty"))
		} else {
			allErrs = append(allErrs, validateCIdentifier(parts[1], fldPath)...)
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, string(name), "must not contain more than one slash"))
	}
	return allErrs
}

// validateFullyQualifiedName additionally requires the domain: constraints
// compare attributes across drivers, where a bare name would be ambiguous.
func validateFullyQualifiedName(name resourceapi.FullyQualifiedName, fldPath *field.Path) field.ErrorList {
	allErrs := validateQualifiedName(resourceapi.QualifiedName(name), fldPath)
	if name != "" && !strings.Contains(string(name), "/") {
		allErrs = append(allErrs, field.Invalid(fldPath, string(name), "must be a domain and a name separated by a slash"))
	}
	return allErrs
}

func validateLabelValue(value string, fldPath *field.Path) field.ErrorList {
	return invalidMessages(fldPath, value, utilvalidation.IsValidLabelValue(value))
}

// validateUID requires the normalized RFC 4122 form, so that two spellings
// of one UID cannot both appear in a list keyed by it.
func validateUID(uid string, fldPath *field.Path) field.ErrorList {
	if err := uuid.Validate(uid); err != nil {
		return field.ErrorList{field.Invalid(fldPath, uid, fmt.Sprintf("not a UID: %v", err))}
	}
	if len(uid) != 36 || uid != strings.ToLower(uid) {
		return field.ErrorList{field.Invalid(fldPath, uid, "must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")}
	}
	return nil
}

// validateRawJSONObject checks opaque parameters and device status data:
// present, at most maxLength bytes (unless stored: objects written before a
// limit change stay valid), and a JSON object.
func validateRawJSONObject(raw runtime.RawExtension, fldPath *field.Path, stored bool, maxLength int) field.ErrorList {
	if len(raw.Raw) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !stored && len(raw.Raw) > maxLength {
		// Not parsed at all: parsing is the expensive part.
		return field.ErrorList{field.TooLong(fldPath, "", maxLength)}
	}
	var value any
	if err := json.Unmarshal(raw.Raw, &value); err != nil {
		return field.ErrorList{field.Invalid(fldPath, "<value omitted>", fmt.Sprintf("not valid JSON: %v", err))}
	}
	if value == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if _, isObject := value.(map[string]any); !isObject {
		return field.ErrorList{field.Invalid(fldPath, "<value omitted>", "must be a JSON object")}
	}
	return nil
}

// IsExtendedResourceName follows Kubernetes' definition (upstream's
// v1helper.IsExtendedResourceName): a domain-prefixed name outside
// *kubernetes.io/, not starting with "requests.", that is a valid
// qualified name when used as a quota key ("requests.<name>"). A
// DeviceClass's spec.extendedResourceName, a pod's container resources and
// the controllers that give devices for extended resources all use it.
func IsExtendedResourceName(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

func validateConditions(conditions []metav1.Condition, maxSize int, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(conditions) > maxSize {
		allErrs = append(allErrs, field.TooMany(fldPath, len(conditions), maxSize))
	}
	return append(allErrs, metav1validation.ValidateConditions(conditions, fldPath)...)
}

// objectMeta validation shared by all kinds: names are DNS subdomains.
func validateObjectMeta(meta *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMeta(meta, namespaced, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

func validateObjectMetaUpdate(meta, old *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	allErrs := validateObjectMeta(meta, namespaced)
	return append(allErrs, apimachineryvalidation.ValidateObjectMetaUpdate(meta, old, field.NewPath("metadata"))...)
}
