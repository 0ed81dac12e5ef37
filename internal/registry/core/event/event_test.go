package event

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   corev1.Event
		wantErr bool
	}{
		{name: "pod event", event: corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"}, Type: corev1.EventTypeNormal}},
		{name: "node event in any namespace", event: corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Node", Namespace: "other", Name: "n"}}},
		{name: "object in another namespace", event: corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "p"}}, wantErr: true},
		{name: "unknown type", event: corev1.Event{Type: "Fatal"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.event.ObjectMeta = metav1.ObjectMeta{Name: "e", Namespace: "ns"}
			errs := Strategy.Validate(context.Background(), &tc.event)
			if (len(errs) > 0) != tc.wantErr {
				t.Errorf("errors %v, want errors: %v", errs, tc.wantErr)
			}
		})
	}
}

func TestTable(t *testing.T) {
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"},
		Type:           corev1.EventTypeWarning,
		Reason:         "FailedScheduling",
		Message:        "no node has the devices\n",
	}
	table, err := tableConvertor.ConvertToTable(context.Background(), event, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"Warning", "FailedScheduling", "pod/p", "no node has the devices"}
	got := table.Rows[0].Cells[1:5]
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cells %v, want %v", got, want)
			break
		}
	}
	if table.ColumnDefinitions[0].Name != "Last Seen" {
		t.Errorf("first column %q, want Last Seen", table.ColumnDefinitions[0].Name)
	}
}

func TestStorageFieldSelectors(t *testing.T) {
	store, err := NewREST(coretesting.NewRESTOptionsGetter(t))
	if err != nil {
		t.Fatal(err)
	}
	coretesting.Ready(t, store.Store.Store)
	ctx := coretesting.Context(t, "ns")
	for _, e := range []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p1", UID: "uid-1"}, Reason: "Scheduled", Type: "Normal"},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p2", UID: "uid-2"}, Reason: "Evicted", Type: "Warning", Source: corev1.EventSource{Component: "devicetainteviction"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, InvolvedObject: corev1.ObjectReference{Kind: "ResourceClaim", Name: "p1"}, Reason: "Allocated", Type: "Normal"},
	} {
		e.Namespace = "ns"
		if _, err := store.Create(ctx, e, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		selector string
		want     []string
	}{
		{"involvedObject.kind=Pod,involvedObject.name=p1", []string{"a"}},
		{"involvedObject.uid=uid-2", []string{"b"}},
		{"type=Normal", []string{"a", "c"}},
		{"reason=Allocated", []string{"c"}},
		{"source=devicetainteviction", []string{"b"}},
	} {
		selector, err := fields.ParseSelector(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		list, err := store.List(ctx, &metainternalversion.ListOptions{FieldSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range list.(*corev1.EventList).Items {
			got = append(got, e.Name)
		}
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) || (len(got) > 1 && got[1] != tc.want[1]) {
			t.Errorf("%s selected %v, want %v", tc.selector, got, tc.want)
		}
	}
}
