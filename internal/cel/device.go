package cel

import (
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	apiservercel "k8s.io/apiserver/pkg/cel"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Device is what a selector expression sees of a device.
type Device struct {
	// Driver is the device's driver; it is also the domain of attribute
	// and capacity names that have none.
	Driver                   string
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	AllowMultipleAllocations *bool
}

// DeviceInput is a device converted into CEL values, ready to be the input
// of any number of evaluations. The allocator builds one per device and
// reuses it for every selector, so attribute conversion (and semver
// parsing) happens once, and lookups during evaluation are plain map
// lookups on CEL values, with no reflection.
type DeviceInput struct {
	device ref.Val
}

var _ interpreter.Activation = (*DeviceInput)(nil)

// NewDeviceInput converts a device. It fails when an attribute has no value
// or a version that is not semver; validation of ResourceSlices rejects
// both, so this only happens for objects that bypassed it.
func NewDeviceInput(d Device) (*DeviceInput, error) {
	attributes := make(map[string]map[ref.Val]ref.Val)
	for name, attr := range d.Attributes {
		value, err := attributeValue(attr)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		domain, id := SplitQualifiedName(name, d.Driver)
		if attributes[domain] == nil {
			attributes[domain] = make(map[ref.Val]ref.Val)
		}
		attributes[domain][types.String(id)] = value
	}

	capacity := make(map[string]map[ref.Val]ref.Val)
	for name, c := range d.Capacity {
		domain, id := SplitQualifiedName(name, d.Driver)
		if capacity[domain] == nil {
			capacity[domain] = make(map[ref.Val]ref.Val)
		}
		quantity := c.Value // copy: the CEL value must not alias the caller's map entry
		capacity[domain][types.String(id)] = apiservercel.Quantity{Quantity: &quantity}
	}

	allowMultiple := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
	device := types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{
		types.String(driverField):              types.String(d.Driver),
		types.String(attributesField):          newDomainMap(attributes),
		types.String(capacityField):            newDomainMap(capacity),
		types.String(allowMultipleAllocsField): types.Bool(allowMultiple),
	})
	return &DeviceInput{device: device}, nil
}

// ResolveName implements interpreter.Activation.
func (in *DeviceInput) ResolveName(name string) (any, bool) {
	if name == deviceVar {
		return in.device, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (in *DeviceInput) Parent() interpreter.Activation { return nil }

// SplitQualifiedName returns the domain and identifier of an attribute or
// capacity name, using defaultDomain (the driver name) when the name has
// no domain.
func SplitQualifiedName(name resourceapi.QualifiedName, defaultDomain string) (domain, id string) {
	if d, i, found := strings.Cut(string(name), "/"); found {
		return d, i
	}
	return defaultDomain, string(name)
}

func attributeValue(attr resourceapi.DeviceAttribute) (ref.Val, error) {
	switch {
	case attr.IntValue != nil:
		return types.Int(*attr.IntValue), nil
	case attr.BoolValue != nil:
		return types.Bool(*attr.BoolValue), nil
	case attr.StringValue != nil:
		return types.String(*attr.StringValue), nil
	case attr.VersionValue != nil:
		return semverValue(*attr.VersionValue)
	case attr.IntValues != nil:
		return listValue(attr.IntValues, func(v int64) (ref.Val, error) { return types.Int(v), nil })
	case attr.BoolValues != nil:
		return listValue(attr.BoolValues, func(v bool) (ref.Val, error) { return types.Bool(v), nil })
	case attr.StringValues != nil:
		return listValue(attr.StringValues, func(v string) (ref.Val, error) { return types.String(v), nil })
	case attr.VersionValues != nil:
		return listValue(attr.VersionValues, semverValue)
	default:
		return nil, fmt.Errorf("no value set")
	}
}

func semverValue(version string) (ref.Val, error) {
	v, err := semver.Parse(version)
	if err != nil {
		return nil, fmt.Errorf("parse semantic version: %w", err)
	}
	return apiservercel.Semver{Version: v}, nil
}

// listValue makes a CEL list of a list attribute (DRAListTypeAttributes),
// so that selectors can test it with `in`, exists() and the like.
func listValue[T any](items []T, convert func(T) (ref.Val, error)) (ref.Val, error) {
	values := make([]ref.Val, len(items))
	for i, item := range items {
		v, err := convert(item)
		if err != nil {
			return nil, err
		}
		values[i] = v
	}
	return types.NewRefValList(types.DefaultTypeAdapter, values), nil
}

// emptyMap is what a lookup of an unknown domain yields.
var emptyMap = types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{})

// domainMap is the outer map of device.attributes or device.capacity.
// Unknown domains read as an empty map, so that a selector can test an
// attribute of another driver's domain with has() or `in` without first
// checking the domain.
type domainMap struct {
	traits.Mapper
}

func newDomainMap(byDomain map[string]map[ref.Val]ref.Val) domainMap {
	values := make(map[ref.Val]ref.Val, len(byDomain))
	for domain, ids := range byDomain {
		values[types.String(domain)] = types.NewRefValMap(types.DefaultTypeAdapter, ids)
	}
	return domainMap{Mapper: types.NewRefValMap(types.DefaultTypeAdapter, values)}
}

// Find implements traits.Mapper.
func (m domainMap) Find(key ref.Val) (ref.Val, bool) {
	if value, found := m.Mapper.Find(key); found {
		return value, true
	}
	if _, isString := key.(types.String); !isString {
		return types.NewErr("no such overload: domain must be a string, got %s", key.Type().TypeName()), true
	}
	return emptyMap, true
}

// Get implements traits.Indexer with the same default as Find.
func (m domainMap) Get(key ref.Val) ref.Val {
	value, _ := m.Find(key)
	return value
}
