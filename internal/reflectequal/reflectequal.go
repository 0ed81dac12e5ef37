// Package reflectequal tells whether two API objects, or parts of them,
// are equal, as reflect.DeepEqual would find them, in less time.
//
// Equal means the same fields, elements and map entries, pointers and
// slices to the same place or to equal values, NaN unequal to itself.
// Unlike reflect.DeepEqual it keeps no record of the pointers it follows,
// which in the server's profiles cost as much as the rest of the
// comparison: it is meant for API objects, which hold no cycles. What it
// does not expect in them (channels, functions, complex numbers, unsafe
// pointers) it calls unequal, so that a caller that falls back on a
// slower comparison when it finds two values unequal stays right.
//
// Equal values are equal to apimachinery's semantic equality too, which
// calls more values equal (a quantity and its other spellings, times in
// other locations); a caller that needs the semantic answer asks this
// one first and the semantic one when this one says unequal.
package reflectequal

import "reflect"

// Equal reports whether a and b are equal. Pass pointers to large
// structs: a struct passed by value is copied into the interface first.
func Equal(a, b any) bool {
	return Values(reflect.ValueOf(a), reflect.ValueOf(b))
}

// Values reports whether l and r are of one type and equal.
func Values(l, r reflect.Value) bool {
	if !l.IsValid() || !r.IsValid() || l.Type() != r.Type() {
		return false
	}
	return equalValues(l, r)
}

func equalValues(l, r reflect.Value) bool {
	switch l.Kind() {
	case reflect.Bool:
		return l.Bool() == r.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return l.Int() == r.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return l.Uint() == r.Uint()
	case reflect.Float32, reflect.Float64:
		return l.Float() == r.Float()
	case reflect.String:
		return l.String() == r.String()
	case reflect.Pointer:
		if l.IsNil() || r.IsNil() {
			return l.IsNil() == r.IsNil()
		}
		return l.UnsafePointer() == r.UnsafePointer() || equalValues(l.Elem(), r.Elem())
	case reflect.Interface:
		if l.IsNil() || r.IsNil() {
			return l.IsNil() == r.IsNil()
		}
		return Values(l.Elem(), r.Elem())
	case reflect.Struct:
		for i := range l.NumField() {
			if !equalValues(l.Field(i), r.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if l.IsNil() != r.IsNil() || l.Len() != r.Len() {
			return false
		}
		if l.UnsafePointer() == r.UnsafePointer() {
			return true
		}
		fallthrough
	case reflect.Array:
		for i := range l.Len() {
			if !equalValues(l.Index(i), r.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if l.IsNil() != r.IsNil() || l.Len() != r.Len() {
			return false
		}
		if l.UnsafePointer() == r.UnsafePointer() {
			return true
		}
		entries := l.MapRange()
		for entries.Next() {
			other := r.MapIndex(entries.Key())
			if !other.IsValid() || !equalValues(entries.Value(), other) {
				return false
			}
		}
		return true
	}
	return false
}
