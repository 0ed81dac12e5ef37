package server

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// typedObjectConverter is the managedFields type converter of the API
// handlers, without the schema check of Go-typed objects.
//
// Upstream's converter checks every object against the OpenAPI schema
// before the field manager compares the old and the new object
// (typed.AsTyped). The field manager allows duplicate list items, and an
// object decoded into its Go type then has nothing for the check to find:
// the schema was generated from the same types. The check is, though, a
// full walk of both objects on every create and update, almost half of
// the field manager's work in the server's profiles. The walks that
// follow (the comparison, the field sets) go over the same values and
// still fail on what they cannot place, such as a keyed list item
// without its key.
//
// The values it gives for Go-typed objects are skipValues: their
// comparison passes by the fields equal in the old and the new object.
//
// Unstructured objects, which server-side apply patches are, and callers
// that do not allow duplicates still get upstream's check. So does the
// first object of each kind, which tells the schema and the type of the
// kind that later objects of the kind reuse.
type typedObjectConverter struct {
	managedfields.TypeConverter
	kinds sync.Map // schema.GroupVersionKind (apimachinery) -> kindType
}

// kindType is where a kind's type is in the converter's schema.
type kindType struct {
	schema  *schema.Schema
	typeRef schema.TypeRef
}

func newTypedObjectConverter(upstream managedfields.TypeConverter) *typedObjectConverter {
	return &typedObjectConverter{TypeConverter: upstream}
}

func (c *typedObjectConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := obj.(*unstructured.Unstructured); ok || !slices.Equal(opts, allowDuplicates) {
		return c.TypeConverter.ObjectToTyped(obj, opts...)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	known, ok := c.kinds.Load(gvk)
	if !ok {
		tv, err := c.TypeConverter.ObjectToTyped(obj, opts...)
		if err != nil {
			return nil, err
		}
		c.kinds.Store(gvk, kindType{schema: tv.Schema(), typeRef: tv.TypeRef()})
		//lint:ignore SA1019 tv was checked just above
		return typed.AsTypedUnvalidated(newSkipValue(tv.AsValue(), reflect.ValueOf(obj)), tv.Schema(), tv.TypeRef()), nil
	}
	v, err := value.NewValueReflect(obj)
	if err != nil {
		// As upstream words it (typed.ParseableType.FromStructured).
		return nil, fmt.Errorf("error creating struct value reflector: %v", err)
	}
	kind := known.(kindType)
	// Deprecated upstream as "validation was expensive; now that this has
	// been solved": in the profiles of this server it was still 7.5% of
	// the CPU while pods were placed, and 6% while simulated nodes
	// registered. TestTypedObjectConverter proves the results the same.
	//lint:ignore SA1019 the check it leaves out is measured above; nothing else does what it does
	return typed.AsTypedUnvalidated(newSkipValue(v, reflect.ValueOf(obj)), kind.schema, kind.typeRef), nil
}

// allowDuplicates are the options of the field manager's conversions.
var allowDuplicates = []typed.ValidationOptions{typed.AllowDuplicates}

var _ managedfields.TypeConverter = &typedObjectConverter{}
