package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

func fieldsOf(errs field.ErrorList) sets.Set[string] {
	out := sets.New[string]()
	for _, err := range errs {
		out.Insert(err.Field)
	}
	return out
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		old    *corev1.NodeSpec
		spec   corev1.NodeSpec
		fields []string
	}{
		{name: "empty"},
		{name: "taints", spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "bad key!", Effect: "Sometimes"},
			{Key: "example.com/gpu", Value: "false", Effect: corev1.TaintEffectNoSchedule},
		}}, fields: []string{"spec.taints[1].key", "spec.taints[1].effect", "spec.taints[2]"}},
		{name: "bad pod CIDR", spec: corev1.NodeSpec{PodCIDR: "nope", PodCIDRs: []string{"nope"}}, fields: []string{"spec.podCIDRs[0]"}},
		{name: "provider ID set once", old: &corev1.NodeSpec{}, spec: corev1.NodeSpec{ProviderID: "fake://a"}},
		{name: "provider ID changed", old: &corev1.NodeSpec{ProviderID: "fake://a"}, spec: corev1.NodeSpec{ProviderID: "fake://b"}, fields: []string{"spec.providerID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "1"}, Spec: tc.spec}
			var errs field.ErrorList
			if tc.old != nil {
				old := &corev1.Node{ObjectMeta: node.ObjectMeta, Spec: *tc.old}
				errs = Strategy.ValidateUpdate(context.Background(), node, old)
			} else {
				errs = Strategy.Validate(context.Background(), node)
			}
			if got, want := fieldsOf(errs), sets.New(tc.fields...); !got.Equal(want) {
				t.Errorf("error fields %v, want %v (%v)", sets.List(got), sets.List(want), errs)
			}
		})
	}
}

func TestTable(t *testing.T) {
	ready := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ready", Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.0"},
		},
	}
	unknown := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unknown"}}
	table, err := tableConvertor.ConvertToTable(context.Background(), &corev1.NodeList{Items: []corev1.Node{ready, unknown}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]interface{}{
		{"ready", "Ready,SchedulingDisabled", "worker", "v1.37.0"},
		{"unknown", "Unknown", "<none>", ""},
	}
	for i, row := range table.Rows {
		got := []interface{}{row.Cells[0], row.Cells[1], row.Cells[2], row.Cells[4]}
		for j := range got {
			if got[j] != want[i][j] {
				t.Errorf("row %d: got %v, want %v", i, got, want[i])
				break
			}
		}
	}
}

func TestStorage(t *testing.T) {
	storage, err := NewStorage(coretesting.NewRESTOptionsGetter(t))
	if err != nil {
		t.Fatal(err)
	}
	coretesting.Ready(t, storage.Node.Store.Store)
	ctx := coretesting.Context(t, "")

	// A node registers with its status in one request.
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	obj, err := storage.Node.Create(ctx, node, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := obj.(*corev1.Node)
	if len(created.Status.Conditions) != 1 {
		t.Errorf("status dropped on create: %+v", created.Status)
	}
	if _, err := storage.Node.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Spec: corev1.NodeSpec{Unschedulable: true}}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Status updates keep the spec.
	created.Spec.Unschedulable = true
	created.Status.Conditions[0].Status = corev1.ConditionFalse
	obj, _, err = storage.Status.Update(ctx, created.Name, rest.DefaultUpdatedObjectInfo(created), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated := obj.(*corev1.Node)
	if updated.Spec.Unschedulable || updated.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("status update: unschedulable=%v ready=%s; want false, False", updated.Spec.Unschedulable, updated.Status.Conditions[0].Status)
	}

	list, err := storage.Node.List(ctx, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.unschedulable", "true")})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*corev1.NodeList).Items; len(items) != 1 || items[0].Name != "node-b" {
		t.Errorf("spec.unschedulable=true selected %v, want node-b", items)
	}
}
