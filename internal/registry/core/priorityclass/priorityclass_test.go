package priorityclass

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/rest"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

func class(name string, value int32, globalDefault bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault}
	if policy != "" {
		pc.PreemptionPolicy = &policy
	}
	return pc
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pc      *schedulingv1.PriorityClass
		wantErr string
	}{
		{name: "user class", pc: class("high", 1000, false, corev1.PreemptLowerPriority)},
		{name: "highest user value", pc: class("top", HighestUserDefinablePriority, false, corev1.PreemptNever)},
		{name: "negative value", pc: class("low", -5, false, "")},
		{name: "above user range", pc: class("too-high", HighestUserDefinablePriority+1, false, ""), wantErr: "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"},
		{name: "system class", pc: class(SystemClusterCritical, SystemCriticalPriority, false, "")},
		{name: "system class with another value", pc: class(SystemNodeCritical, 5, false, ""), wantErr: "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000"},
		{name: "system class as default", pc: class(SystemClusterCritical, SystemCriticalPriority, true, ""), wantErr: "globalDefault of system-cluster-critical PriorityClass must be false"},
		{name: "unknown system name", pc: class("system-mine", 10, false, ""), wantErr: "system-mine is not a known system priority class"},
		{name: "bad policy", pc: class("p", 10, false, "Sometimes"), wantErr: `preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`},
		{name: "no policy", pc: class("p", 10, false, "")},
		{name: "bad name", pc: class("Not_A_Name", 10, false, ""), wantErr: "metadata.name: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Strategy.Validate(context.Background(), tc.pc)
			if got := errs.ToAggregate(); (got != nil) != (tc.wantErr != "") || (got != nil && !strings.Contains(got.Error(), tc.wantErr)) {
				t.Errorf("errors %v, want %q", got, tc.wantErr)
			}
		})
	}
	emptyPolicy := class("p", 10, false, "")
	emptyPolicy.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy(""))
	if errs := Strategy.Validate(context.Background(), emptyPolicy); len(errs) != 1 || errs[0].Field != "preemptionPolicy" {
		t.Errorf("empty preemptionPolicy: %v", errs)
	}
}

func TestValidateUpdate(t *testing.T) {
	old := class("high", 1000, false, corev1.PreemptLowerPriority)
	old.ResourceVersion = "1"
	for _, tc := range []struct {
		name    string
		update  func(*schedulingv1.PriorityClass)
		wantErr string
	}{
		{name: "description", update: func(pc *schedulingv1.PriorityClass) { pc.Description = "important" }},
		{name: "global default", update: func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true }},
		{name: "value", update: func(pc *schedulingv1.PriorityClass) { pc.Value = 2000 }, wantErr: "value: Forbidden: may not be changed in an update."},
		{name: "preemption policy", update: func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = ptr.To(corev1.PreemptNever) }, wantErr: "preemptionPolicy: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := old.DeepCopy()
			tc.update(pc)
			errs := Strategy.ValidateUpdate(context.Background(), pc, old)
			if got := errs.ToAggregate(); (got != nil) != (tc.wantErr != "") || (got != nil && !strings.Contains(got.Error(), tc.wantErr)) {
				t.Errorf("errors %v, want %q", got, tc.wantErr)
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
	ctx := coretesting.Context(t, "")
	create := func(pc *schedulingv1.PriorityClass) error {
		_, err := store.Create(ctx, pc, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		return err
	}
	for _, pc := range SystemPriorityClasses() {
		if err := create(pc); err != nil {
			t.Fatalf("create %s: %v", pc.Name, err)
		}
	}
	if _, _, err := store.Delete(ctx, SystemClusterCritical, rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "this is a system priority class and cannot be deleted") {
		t.Errorf("deleting a system class: %v", err)
	}

	if err := create(class("batch", 100, true, "")); err != nil {
		t.Fatal(err)
	}
	obj, err := store.Get(ctx, "batch", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*schedulingv1.PriorityClass); ptr.Deref(got.PreemptionPolicy, "") != corev1.PreemptLowerPriority || got.Generation != 1 {
		t.Errorf("stored %+v", got)
	}
	err = create(class("second", 200, true, ""))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PriorityClass batch is already marked as default. Only one default can exist") {
		t.Errorf("second default on create: %v", err)
	}
	if err := create(class("second", 200, false, "")); err != nil {
		t.Fatal(err)
	}
	update := func(name string, change func(*schedulingv1.PriorityClass)) error {
		_, _, err := store.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
			pc := oldObj.DeepCopyObject().(*schedulingv1.PriorityClass)
			change(pc)
			return pc, nil
		}), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
		return err
	}
	if err := update("second", func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true }); !apierrors.IsForbidden(err) {
		t.Errorf("second default on update: %v", err)
	}
	// The default itself may be updated while it stays the default.
	if err := update("batch", func(pc *schedulingv1.PriorityClass) { pc.Description = "the default" }); err != nil {
		t.Errorf("updating the default: %v", err)
	}
	if err := update("batch", func(pc *schedulingv1.PriorityClass) { pc.Value = 5 }); !apierrors.IsInvalid(err) {
		t.Errorf("changing the value: %v", err)
	}
	table, err := store.ConvertToTable(ctx, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cells := table.Rows[0].Cells; cells[0] != "batch" || cells[1] != int64(100) || cells[2] != true || cells[4] != "PreemptLowerPriority" {
		t.Errorf("table row %v", cells)
	}
}

func TestAdmission(t *testing.T) {
	nonPreempting := class("nonpreempting", 500, false, corev1.PreemptNever)
	for _, tc := range []struct {
		name        string
		classes     []*schedulingv1.PriorityClass
		namespace   string
		spec        corev1.PodSpec
		operation   admission.Operation
		subresource string
		wantErr     string
		wantClass   string
		want        *int32
		wantPolicy  corev1.PreemptionPolicy
	}{
		{
			name: "no class, no default", want: ptr.To[int32](0), wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:    "no class, the global default applies",
			classes: []*schedulingv1.PriorityClass{class("default-pc", 42, true, corev1.PreemptNever), class("other", 7, false, "")},
			want:    ptr.To[int32](42), wantPolicy: corev1.PreemptNever, wantClass: "default-pc",
		},
		{
			name:    "two defaults after a race: the lower value",
			classes: []*schedulingv1.PriorityClass{class("d1", 42, true, corev1.PreemptLowerPriority), class("d2", 10, true, corev1.PreemptLowerPriority)},
			want:    ptr.To[int32](10), wantPolicy: corev1.PreemptLowerPriority, wantClass: "d2",
		},
		{
			name:    "named class",
			classes: []*schedulingv1.PriorityClass{nonPreempting},
			spec:    corev1.PodSpec{PriorityClassName: "nonpreempting"},
			want:    ptr.To[int32](500), wantPolicy: corev1.PreemptNever, wantClass: "nonpreempting",
		},
		{
			name:    "named class wins over the default",
			classes: []*schedulingv1.PriorityClass{nonPreempting, class("default-pc", 42, true, corev1.PreemptLowerPriority)},
			spec:    corev1.PodSpec{PriorityClassName: "nonpreempting"},
			want:    ptr.To[int32](500), wantPolicy: corev1.PreemptNever, wantClass: "nonpreempting",
		},
		{
			name:    "unknown class",
			spec:    corev1.PodSpec{PriorityClassName: "gold"},
			wantErr: `pods "p" is forbidden: no PriorityClass with name gold was found`,
		},
		{
			name:    "priority agrees with the class",
			classes: []*schedulingv1.PriorityClass{nonPreempting},
			spec:    corev1.PodSpec{PriorityClassName: "nonpreempting", Priority: ptr.To[int32](500)},
			want:    ptr.To[int32](500), wantPolicy: corev1.PreemptNever, wantClass: "nonpreempting",
		},
		{
			name:    "priority disagrees with the class",
			classes: []*schedulingv1.PriorityClass{nonPreempting},
			spec:    corev1.PodSpec{PriorityClassName: "nonpreempting", Priority: ptr.To[int32](1)},
			wantErr: `pods "p" is forbidden: the integer value of priority (1) must not be provided in pod spec; priority admission controller computed 500 from the given PriorityClass name`,
		},
		{
			name:    "priority without class or default",
			spec:    corev1.PodSpec{Priority: ptr.To[int32](7)},
			wantErr: "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0",
		},
		{
			name:    "preemptionPolicy disagrees with the class",
			classes: []*schedulingv1.PriorityClass{nonPreempting},
			spec:    corev1.PodSpec{PriorityClassName: "nonpreempting", PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)},
			wantErr: `pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name`,
		},
		{
			name:    "preemptionPolicy Never without a class",
			spec:    corev1.PodSpec{PreemptionPolicy: ptr.To(corev1.PreemptNever)},
			wantErr: "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority",
		},
		{
			// As upstream: the system classes are not limited to kube-system.
			name:      "system class outside kube-system",
			classes:   SystemPriorityClasses(),
			namespace: "default",
			spec:      corev1.PodSpec{PriorityClassName: SystemNodeCritical},
			want:      ptr.To(SystemCriticalPriority + 1000), wantPolicy: corev1.PreemptLowerPriority, wantClass: SystemNodeCritical,
		},
		{
			name:      "update is left alone",
			operation: admission.Update,
			spec:      corev1.PodSpec{PriorityClassName: "gold"},
			wantClass: "gold",
		},
		{
			name:        "subresource is left alone",
			subresource: "status",
			spec:        corev1.PodSpec{PriorityClassName: "gold"},
			wantClass:   "gold",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin := testAdmission(t, tc.classes)
			namespace := tc.namespace
			if namespace == "" {
				namespace = "ns"
			}
			operation := tc.operation
			if operation == "" {
				operation = admission.Create
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespace}, Spec: tc.spec}
			attrs := admission.NewAttributesRecord(pod, nil, corescheme.CoreV1.WithKind("Pod"), namespace, "p",
				corescheme.CoreV1.WithResource("pods"), tc.subresource, operation, &metav1.CreateOptions{}, false, nil)
			err := plugin.Admit(context.Background(), attrs, nil)
			if !admitted(t, err, tc.wantErr) {
				return
			}
			if pod.Spec.PriorityClassName != tc.wantClass {
				t.Errorf("priorityClassName %q, want %q", pod.Spec.PriorityClassName, tc.wantClass)
			}
			if !ptr.Equal(pod.Spec.Priority, tc.want) {
				t.Errorf("priority %v, want %v", ptr.Deref(pod.Spec.Priority, -1), ptr.Deref(tc.want, -1))
			}
			if got := ptr.Deref(pod.Spec.PreemptionPolicy, ""); got != tc.wantPolicy {
				t.Errorf("preemptionPolicy %q, want %q", got, tc.wantPolicy)
			}
		})
	}
	if plugin := (&Admission{Handler: admission.NewHandler(admission.Create)}); plugin.Handles(admission.Update) {
		t.Error("the plugin handles updates: every update would decode its managedFields again")
	}
}

// TestAdmissionPodGroup: a new PodGroup's priority is resolved as a pod's
// (upstream's Priority admission for PodGroups); its preemptionPolicy is
// not, as the PodGroupPreemptionPolicy gate is off.
func TestAdmissionPodGroup(t *testing.T) {
	classes := []*schedulingv1.PriorityClass{class("default-pc", 42, true, corev1.PreemptNever), class("high", 1000, false, corev1.PreemptNever)}
	for _, tc := range []struct {
		name      string
		classes   []*schedulingv1.PriorityClass
		spec      schedulingv1beta1.PodGroupSpec
		operation admission.Operation
		wantErr   string
		wantClass string
		want      *int32
	}{
		{name: "no class: the global default", classes: classes, want: ptr.To[int32](42), wantClass: "default-pc"},
		{name: "no class, no default", want: ptr.To[int32](0)},
		{name: "named class", classes: classes, spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: "high"}, want: ptr.To[int32](1000), wantClass: "high"},
		{name: "priority agrees", classes: classes, spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: "high", Priority: ptr.To[int32](1000)}, want: ptr.To[int32](1000), wantClass: "high"},
		{
			name: "priority disagrees", classes: classes, spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: "high", Priority: ptr.To[int32](5)},
			wantErr: `podgroups.scheduling.k8s.io "g" is forbidden: the integer value of priority (5) must not be provided in pod group spec; priority admission controller computed 1000`,
		},
		{name: "unknown class", classes: classes, spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: "gold"}, wantErr: "no PriorityClass with name gold was found"},
		{name: "update is left alone", operation: admission.Update, spec: schedulingv1beta1.PodGroupSpec{PriorityClassName: "gold"}, wantClass: "gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin := testAdmission(t, tc.classes)
			operation := tc.operation
			if operation == "" {
				operation = admission.Create
			}
			group := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"}, Spec: tc.spec}
			gv := schedulingv1beta1.SchemeGroupVersion
			attrs := admission.NewAttributesRecord(group, nil, gv.WithKind("PodGroup"), "ns", "g",
				gv.WithResource("podgroups"), "", operation, &metav1.CreateOptions{}, false, nil)
			err := plugin.Admit(context.Background(), attrs, nil)
			if !admitted(t, err, tc.wantErr) {
				return
			}
			if group.Spec.PriorityClassName != tc.wantClass {
				t.Errorf("priorityClassName %q, want %q", group.Spec.PriorityClassName, tc.wantClass)
			}
			if !ptr.Equal(group.Spec.Priority, tc.want) {
				t.Errorf("priority %v, want %v", ptr.Deref(group.Spec.Priority, -1), ptr.Deref(tc.want, -1))
			}
			if group.Spec.PreemptionPolicy != nil {
				t.Errorf("preemptionPolicy %q set with the PodGroupPreemptionPolicy gate off", *group.Spec.PreemptionPolicy)
			}
		})
	}
}

// testAdmission is the plugin on a lister of classes.
func testAdmission(t *testing.T, classes []*schedulingv1.PriorityClass) *Admission {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, pc := range classes {
		if err := indexer.Add(pc); err != nil {
			t.Fatal(err)
		}
	}
	return &Admission{Handler: admission.NewHandler(admission.Create), lister: schedulinglisters.NewPriorityClassLister(indexer)}
}

// admitted checks Admit's error against wantErr (a 403 containing it);
// true when the object was admitted and its fields are to be checked.
func admitted(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) || !apierrors.IsForbidden(err) {
			t.Fatalf("error %v, want 403 with %q", err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
