package validation

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxQuantityDigits is how many decimal digits the integer part of a
// quantity may have: int64 holds 19.
const maxQuantityDigits = 19

var quantityType = reflect.TypeOf(apiresource.Quantity{})

// ValidateQuantityMagnitudes refuses every quantity in obj (a struct or a
// pointer to one) outside the range of int64, naming its field by the JSON
// names of the path to it.
//
// It runs before any other check of an object that holds quantities:
// comparing a quantity such as 1e999999999 with another one computes
// 10^999999999, which takes the process minutes of CPU and gigabytes. The
// allocator counts in int64 milli-units anyway; such values mean nothing
// to it.
func ValidateQuantityMagnitudes(obj any, fldPath *field.Path) field.ErrorList {
	v := reflect.ValueOf(obj)
	// A first walk only checks, building no paths: it allocates nothing
	// for an object whose quantities all fit, as nearly all do. Only when
	// one does not is the object walked again for the errors' paths.
	if walkQuantities(v, fldPath, false) == nil {
		return nil
	}
	return walkQuantities(v, fldPath, true)
}

// walkQuantities refuses the quantities in v outside int64. With paths,
// each error names its field under fldPath; without, every error names
// fldPath, and the walk allocates nothing until it finds one.
func walkQuantities(v reflect.Value, fldPath *field.Path, paths bool) field.ErrorList {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return walkQuantities(v.Elem(), fldPath, paths)
	case reflect.Slice, reflect.Array:
		var allErrs field.ErrorList
		for i := range v.Len() {
			p := fldPath
			if paths {
				p = fldPath.Index(i)
			}
			allErrs = append(allErrs, walkQuantities(v.Index(i), p, paths)...)
		}
		return allErrs
	case reflect.Map:
		if v.Len() == 0 || v.Type().Key().Kind() != reflect.String || !holdsQuantities(v.Type().Elem()) {
			return nil
		}
		var allErrs field.ErrorList
		value := reflect.New(v.Type().Elem()).Elem()
		iter := v.MapRange()
		for iter.Next() {
			value.SetIterValue(iter)
			p := fldPath
			if paths {
				p = fldPath.Key(iter.Key().String())
			}
			allErrs = append(allErrs, walkQuantities(value, p, paths)...)
		}
		return sortedErrors(allErrs)
	case reflect.Struct:
		if v.Type() == quantityType {
			var q apiresource.Quantity
			if v.CanAddr() {
				q = *(*apiresource.Quantity)(v.Addr().UnsafePointer())
			} else {
				q = v.Interface().(apiresource.Quantity)
			}
			if !QuantityFitsInt64(q) {
				return field.ErrorList{field.Invalid(fldPath, q.String(),
					"must be between "+strconv.FormatInt(math.MinInt64, 10)+" and "+strconv.FormatInt(math.MaxInt64, 10))}
			}
			return nil
		}
		var allErrs field.ErrorList
		for _, f := range quantityFields(v.Type()) {
			p := fldPath
			if paths && f.name != "" {
				p = fldPath.Child(f.name)
			}
			allErrs = append(allErrs, walkQuantities(v.Field(f.index), p, paths)...)
		}
		return allErrs
	}
	return nil
}

// quantityField is a field of a struct that can hold quantities: its
// index and JSON name ("" for an embedded or untagged field).
type quantityField struct {
	index int
	name  string
}

// quantityFields are the exported fields of the struct type t that can
// hold quantities, remembered per type.
func quantityFields(t reflect.Type) []quantityField {
	if known, ok := structQuantityFields.Load(t); ok {
		return known.([]quantityField)
	}
	var fields []quantityField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || !holdsQuantities(f.Type) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			name = ""
		}
		fields = append(fields, quantityField{index: i, name: name})
	}
	structQuantityFields.Store(t, fields)
	return fields
}

// structQuantityFields remembers quantityFields per struct type.
var structQuantityFields sync.Map

// holdsQuantities reports whether a value of type t can contain a quantity.
func holdsQuantities(t reflect.Type) bool {
	if known, ok := quantityTypes.Load(t); ok {
		return known.(bool)
	}
	holds := holdsQuantitiesSeen(t, map[reflect.Type]bool{})
	quantityTypes.Store(t, holds)
	return holds
}

// quantityTypes remembers holdsQuantities per type.
var quantityTypes sync.Map

func holdsQuantitiesSeen(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == quantityType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsQuantitiesSeen(t.Elem(), seen)
	case reflect.Map:
		return holdsQuantitiesSeen(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && holdsQuantitiesSeen(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// QuantityFitsInt64 tells whether q lies within the range of int64, without
// any arithmetic whose cost grows with q's exponent.
func QuantityFitsInt64(q apiresource.Quantity) bool {
	// An int64 amount with a small positive or no scale converts
	// without arithmetic on big numbers; a zero one may have any scale,
	// and converting it would loop over the scale.
	if q.IsZero() {
		return true
	}
	if _, ok := q.AsInt64(); ok {
		return true
	}
	c := q.DeepCopy() // AsDec changes the quantity's form; work on a copy
	d := c.AsDec()
	digits := len(strings.TrimPrefix(d.UnscaledBig().String(), "-"))
	if d.UnscaledBig().Sign() == 0 || digits-int(d.Scale()) < maxQuantityDigits {
		return true
	}
	if digits-int(d.Scale()) > maxQuantityDigits {
		return false
	}
	// Nineteen digits: close enough to compare exactly.
	return q.CmpInt64(math.MaxInt64) <= 0 && q.CmpInt64(math.MinInt64) >= 0
}
