// Package table builds kubectl-style tables for every resource we serve;
// genericregistry.Store's default table only shows a name and an age.
package table

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

var objectMetaDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// NameColumn is the first column of every table.
var NameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDescriptions["name"]}

// AgeColumn shows how long ago an object was created.
var AgeColumn = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDescriptions["creationTimestamp"]}

// Convertor turns single objects and lists of T into tables with the given
// columns; Row returns one cell per column.
type Convertor[T runtime.Object] struct {
	Columns []metav1.TableColumnDefinition
	Row     func(obj T) []interface{}
}

// ConvertToTable implements rest.TableConvertor.
func (c Convertor[T]) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || opts == nil || !opts.NoHeaders {
		table.ColumnDefinitions = c.Columns
	}
	addRow := func(obj runtime.Object) error {
		typed, ok := obj.(T)
		if !ok {
			return fmt.Errorf("unexpected object type %T in table", obj)
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: c.Row(typed), Object: runtime.RawExtension{Object: obj}})
		return nil
	}
	if meta.IsListType(object) {
		if err := meta.EachListItem(object, addRow); err != nil {
			return nil, err
		}
		if list, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = list.GetResourceVersion()
			table.Continue = list.GetContinue()
			table.RemainingItemCount = list.GetRemainingItemCount()
		}
		return table, nil
	}
	if err := addRow(object); err != nil {
		return nil, err
	}
	if m, err := meta.Accessor(object); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// Age renders the time since t like kubectl does ("5m", "3d"), or
// "<unknown>" for a zero time.
func Age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// JoinOrNone renders values as a comma-separated cell, "<none>" if empty.
func JoinOrNone(values []string) string {
	if len(values) == 0 {
		return "<none>"
	}
	return strings.Join(values, ",")
}
