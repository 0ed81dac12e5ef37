package table

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var nodeNames = Convertor[*corev1.Node]{
	Columns: []metav1.TableColumnDefinition{NameColumn, AgeColumn},
	Row:     func(node *corev1.Node) []interface{} { return []interface{}{node.Name, Age(node.CreationTimestamp)} },
}

func TestConvertor(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-90 * time.Minute))
	list := &corev1.NodeList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "more"},
		Items:    []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: created}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}},
	}
	for _, tc := range []struct {
		name        string
		object      interface{}
		options     *metav1.TableOptions
		wantRows    [][]interface{}
		wantColumns int
		wantRV      string
	}{
		{name: "list", object: list, wantRows: [][]interface{}{{"a", "90m"}, {"b", "<unknown>"}}, wantColumns: 2, wantRV: "42"},
		{name: "no headers", object: list, options: &metav1.TableOptions{NoHeaders: true}, wantRows: [][]interface{}{{"a", "90m"}, {"b", "<unknown>"}}, wantColumns: 0, wantRV: "42"},
		{name: "single object", object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "7"}}, wantRows: [][]interface{}{{"c", "<unknown>"}}, wantColumns: 2, wantRV: "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var table *metav1.Table
			var err error
			switch obj := tc.object.(type) {
			case *corev1.NodeList:
				table, err = nodeNames.ConvertToTable(context.Background(), obj, tc.options)
			case *corev1.Node:
				table, err = nodeNames.ConvertToTable(context.Background(), obj, tc.options)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(table.ColumnDefinitions) != tc.wantColumns || table.ResourceVersion != tc.wantRV {
				t.Errorf("got %d columns, resourceVersion %q; want %d, %q", len(table.ColumnDefinitions), table.ResourceVersion, tc.wantColumns, tc.wantRV)
			}
			if len(table.Rows) != len(tc.wantRows) {
				t.Fatalf("got %d rows, want %d", len(table.Rows), len(tc.wantRows))
			}
			for i, row := range table.Rows {
				for j, cell := range tc.wantRows[i] {
					if row.Cells[j] != cell {
						t.Errorf("row %d cell %d: got %v, want %v", i, j, row.Cells[j], cell)
					}
				}
				if row.Object.Object == nil {
					t.Errorf("row %d carries no object", i)
				}
			}
		})
	}
	if _, err := nodeNames.ConvertToTable(context.Background(), &corev1.Pod{}, nil); err == nil {
		t.Error("a pod in a node table was accepted")
	}
}
