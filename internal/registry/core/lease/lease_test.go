package lease

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    coordinationv1.LeaseSpec
		wantErr bool
	}{
		{name: "holder", spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](15)}},
		{name: "zero duration", spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](0)}, wantErr: true},
		{name: "negative transitions", spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr.To[int32](-1)}, wantErr: true},
		{name: "preferred holder without strategy", spec: coordinationv1.LeaseSpec{PreferredHolder: ptr.To("b")}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: tc.spec}
			if errs := Strategy.Validate(context.Background(), lease); (len(errs) > 0) != tc.wantErr {
				t.Errorf("errors %v, want errors: %v", errs, tc.wantErr)
			}
		})
	}
}

func TestStorage(t *testing.T) {
	store, err := NewREST(coretesting.NewRESTOptionsGetter(t))
	if err != nil {
		t.Fatal(err)
	}
	coretesting.Ready(t, store.Store.Store)
	ctx := coretesting.Context(t, "kube-system")
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "draplane-controllers", Namespace: "kube-system"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-1"), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	obj, err := store.Create(ctx, lease, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := store.ConvertToTable(ctx, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cells := table.Rows[0].Cells; cells[0] != "draplane-controllers" || cells[1] != "replica-1" {
		t.Errorf("table row %v", cells)
	}
}
