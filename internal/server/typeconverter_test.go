package server

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// upstreamTypeConverter is the converter the generic server builds for
// pods, ResourceSlices and ResourceClaims.
func upstreamTypeConverter(t testing.TB) managedfields.TypeConverter {
	t.Helper()
	scheme, err := newOpenAPIScheme()
	if err != nil {
		t.Fatal(err)
	}
	_, v3 := openAPIConfigs(scheme)
	models, err := builder3.BuildOpenAPIDefinitionsForResources(v3,
		"io.k8s.api.core.v1.Pod",
		"github.com/draplane/draplane/apis/resource/v1.ResourceSlice",
		"github.com/draplane/draplane/apis/resource/v1.ResourceClaim")
	if err != nil {
		t.Fatal(err)
	}
	converter, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		t.Fatal(err)
	}
	return converter
}

func withKind(obj runtime.Object, gvk schema.GroupVersionKind) runtime.Object {
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

var (
	podKind   = corev1.SchemeGroupVersion.WithKind("Pod")
	sliceKind = resourcev1.SchemeGroupVersion.WithKind("ResourceSlice")
	claimKind = resourcev1.SchemeGroupVersion.WithKind("ResourceClaim")
)

func testPod(phase corev1.PodPhase, image string) *corev1.Pod {
	return withKind(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: image,
				Ports:     []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("t")}},
		},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}, podKind).(*corev1.Pod)
}

func testSlice(devices int) *resourcev1.ResourceSlice {
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "gpu.example.com", NodeName: ptr.To("node-1"),
			Pool: resourcev1.ResourcePool{Name: "node-1", ResourceSliceCount: 1},
		},
	}
	for i := range devices {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name:       "gpu-" + string(rune('a'+i)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To("x")}, "index": {IntValue: ptr.To(int64(i))}},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}},
		})
	}
	return withKind(slice, sliceKind).(*resourcev1.ResourceSlice)
}

func testClaim(allocated bool) *resourcev1.ResourceClaim {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	if allocated {
		claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-a",
		}}}}
		claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	}
	return withKind(claim, claimKind).(*resourcev1.ResourceClaim)
}

func duplicateContainers(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.Containers = append(pod.Spec.Containers, pod.Spec.Containers[0])
	return pod
}

// conversion is what the field manager makes of an old and a new object.
type conversion struct {
	fields, comparison string
	err                string
}

func convert(converter managedfields.TypeConverter, old, updated runtime.Object) conversion {
	oldTyped, err := converter.ObjectToTyped(old, typed.AllowDuplicates)
	if err != nil {
		return conversion{err: "old: " + err.Error()}
	}
	newTyped, err := converter.ObjectToTyped(updated, typed.AllowDuplicates)
	if err != nil {
		return conversion{err: "new: " + err.Error()}
	}
	fields, err := newTyped.ToFieldSet()
	if err != nil {
		return conversion{err: "field set: " + err.Error()}
	}
	comparison, err := oldTyped.Compare(newTyped)
	if err != nil {
		return conversion{err: "comparison: " + err.Error()}
	}
	return conversion{fields: fields.String(), comparison: comparison.String()}
}

// TestTypedObjectConverter: for typed objects the converter gives the
// field sets and comparisons upstream's gives, for the first object of
// each kind and once the kind is known; conversions that do not allow
// duplicates and unstructured objects get upstream's check.
func TestTypedObjectConverter(t *testing.T) {
	upstream := upstreamTypeConverter(t)
	ours := newTypedObjectConverter(upstream)
	pairs := map[string]struct{ old, new runtime.Object }{
		"pod status":           {testPod(corev1.PodPending, "i:1"), testPod(corev1.PodRunning, "i:1")},
		"pod spec":             {testPod(corev1.PodPending, "i:1"), testPod(corev1.PodPending, "i:2")},
		"duplicate containers": {testPod(corev1.PodPending, "i:1"), duplicateContainers(testPod(corev1.PodPending, "i:2"))},
		"slice devices":        {testSlice(2), testSlice(8)},
		"claim allocation":     {testClaim(false), testClaim(true)},
		"claim unallocated":    {testClaim(true), testClaim(false)},
	}
	for _, round := range []string{"first object of the kind", "kind known"} {
		for name, pair := range pairs {
			t.Run(round+"/"+name, func(t *testing.T) {
				want := convert(upstream, pair.old, pair.new)
				if want.err != "" {
					t.Fatalf("upstream: %s", want.err)
				}
				if got := convert(ours, pair.old, pair.new); got != want {
					t.Errorf("upstream's converter gave\n%+v\nours gave\n%+v", want, got)
				}
			})
		}
	}
	for _, gvk := range []schema.GroupVersionKind{podKind, sliceKind, claimKind} {
		if _, known := ours.kinds.Load(gvk); !known {
			t.Errorf("kind %s not learned", gvk)
		}
	}

	t.Run("duplicates not allowed", func(t *testing.T) {
		pod := duplicateContainers(testPod(corev1.PodPending, "i:1"))
		if _, err := ours.ObjectToTyped(pod); err == nil || !strings.Contains(err.Error(), "duplicate") {
			t.Errorf("got %v, want upstream's error about the duplicate container", err)
		}
	})

	t.Run("unstructured, off the schema", func(t *testing.T) {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(testPod(corev1.PodPending, "i:1"))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: content}
		obj.Object["spec"].(map[string]interface{})["nodeName"] = int64(3)
		if _, err := ours.ObjectToTyped(obj, typed.AllowDuplicates); err == nil || !strings.Contains(err.Error(), "nodeName") {
			t.Errorf("got %v, want upstream's error about nodeName", err)
		}
	})
}

// TestSkipValueZip: a zip of two Go-typed objects of one kind passes by
// the fields equal in both, down through the structs that differ, and a
// zip with an unstructured object goes over every field.
func TestSkipValueZip(t *testing.T) {
	ours := newTypedObjectConverter(upstreamTypeConverter(t))
	old := testPod(corev1.PodPending, "i:1")
	old.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}
	updated := testPod(corev1.PodRunning, "i:1")
	updated.Spec = old.Spec

	zipped := func(lhs, rhs runtime.Object, path ...string) []string {
		t.Helper()
		l, err := ours.ObjectToTyped(lhs, typed.AllowDuplicates)
		if err != nil {
			t.Fatal(err)
		}
		var r value.Value
		if u, ok := rhs.(*unstructured.Unstructured); ok {
			r = value.NewValueInterface(u.Object)
		} else {
			rt, err := ours.ObjectToTyped(rhs, typed.AllowDuplicates)
			if err != nil {
				t.Fatal(err)
			}
			r = rt.AsValue()
		}
		return zippedKeys(l.AsValue(), r, path...)
	}

	if got, want := zipped(old, updated), []string{"metadata", "status"}; !slices.Equal(got, want) {
		t.Errorf("top level: zipped %v, want %v", got, want)
	}
	if got, want := zipped(old, updated, "metadata"), []string{"managedFields"}; !slices.Equal(got, want) {
		t.Errorf("metadata: zipped %v, want %v", got, want)
	}
	if got, want := zipped(old, updated, "status"), []string{"phase"}; !slices.Equal(got, want) {
		t.Errorf("status: zipped %v, want %v", got, want)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := zipped(old, &unstructured.Unstructured{Object: content}), []string{"apiVersion", "kind", "metadata", "spec", "status"}; !slices.Equal(got, want) {
		t.Errorf("with an unstructured object: zipped %v, want %v", got, want)
	}
}

// zippedKeys lists the keys a zip of two maps gives, or of their values
// at path.
func zippedKeys(l, r value.Value, path ...string) []string {
	var keys []string
	l.AsMap().Zip(r.AsMap(), value.Unordered, func(k string, lhs, rhs value.Value) bool {
		if len(path) == 0 {
			keys = append(keys, k)
		} else if k == path[0] && lhs != nil && rhs != nil {
			// The zip's values are reused once it goes on.
			keys = zippedKeys(lhs, rhs, path[1:]...)
		}
		return true
	})
	slices.Sort(keys)
	return keys
}

// TestFieldManagerConverters: field managers on our converter and on
// upstream's record the same managedFields through creates, updates of
// the status and the spec, and server-side applies.
func TestFieldManagerConverters(t *testing.T) {
	upstream := upstreamTypeConverter(t)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := resourcev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	manager := func(t *testing.T, converter managedfields.TypeConverter, kind schema.GroupVersionKind, subresource string) *managedfields.FieldManager {
		t.Helper()
		fm, err := managedfields.NewDefaultFieldManager(converter, runtime.UnsafeObjectConvertor(scheme), scheme, scheme, kind, kind.GroupVersion(), subresource, nil)
		if err != nil {
			t.Fatal(err)
		}
		return fm
	}
	type step struct {
		manager     string
		subresource string
		// change makes the new object from a copy of the live one;
		// apply, when set, is the applied configuration instead.
		change func(obj runtime.Object)
		apply  string
	}
	podLabel := func(obj runtime.Object) { obj.(*corev1.Pod).Labels["tier"] = "x" }
	cases := map[string]struct {
		kind  schema.GroupVersionKind
		first runtime.Object
		steps []step
	}{
		"pod": {kind: podKind, first: testPod(corev1.PodPending, "i:1"), steps: []step{
			{manager: "controller", subresource: "status", change: func(obj runtime.Object) {
				pod := obj.(*corev1.Pod)
				pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu")}}
			}},
			{manager: "kubelet", subresource: "status", change: func(obj runtime.Object) {
				pod := obj.(*corev1.Pod)
				pod.Status.Phase = corev1.PodRunning
				pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			}},
			{manager: "applier", apply: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"owner":"me"}},"spec":{"containers":[{"name":"c","image":"i:3"}]}}`},
			{manager: "labeler", change: podLabel},
			{manager: "kubelet", subresource: "status", change: func(obj runtime.Object) {
				pod := obj.(*corev1.Pod)
				pod.Status.Conditions = pod.Status.Conditions[:1]
			}},
			{manager: "client", change: func(obj runtime.Object) {
				pod := obj.(*corev1.Pod)
				pod.Spec.Containers[0].Image = "i:4"
				delete(pod.Labels, "app")
			}},
			{manager: "labeler", change: podLabel},
		}},
		"claim": {kind: claimKind, first: testClaim(false), steps: []step{
			{manager: "scheduler", subresource: "status", change: func(obj runtime.Object) {
				obj.(*resourcev1.ResourceClaim).Status = testClaim(true).Status
			}},
			{manager: "scheduler", subresource: "status", change: func(obj runtime.Object) {
				obj.(*resourcev1.ResourceClaim).Status.ReservedFor = nil
			}},
			{manager: "applier", subresource: "status", apply: `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},"status":{"devices":[{"driver":"gpu.example.com","pool":"node-1","device":"gpu-a","conditions":[{"type":"Ready","status":"True","reason":"R","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}}`},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			run := func(converter managedfields.TypeConverter) []metav1.ManagedFieldsEntry {
				managers := map[string]*managedfields.FieldManager{}
				fm := func(subresource string) *managedfields.FieldManager {
					if managers[subresource] == nil {
						managers[subresource] = manager(t, converter, tc.kind, subresource)
					}
					return managers[subresource]
				}
				empty, err := scheme.New(tc.kind)
				if err != nil {
					t.Fatal(err)
				}
				live := fm("").UpdateNoErrors(withKind(empty, tc.kind), tc.first.DeepCopyObject(), "creator")
				for i, s := range tc.steps {
					if s.apply != "" {
						patch := &unstructured.Unstructured{}
						if err := patch.UnmarshalJSON([]byte(s.apply)); err != nil {
							t.Fatal(err)
						}
						applied, err := fm(s.subresource).Apply(live, patch, s.manager, true)
						if err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						live = applied
						continue
					}
					updated := live.DeepCopyObject()
					s.change(updated)
					if s.subresource == "status" {
						// The status updates' new objects share the
						// old one's spec, which the comparison passes
						// by at once; the others are whole copies, as
						// if decoded from a request.
						switch obj := updated.(type) {
						case *corev1.Pod:
							obj.Spec = live.(*corev1.Pod).Spec
						case *resourcev1.ResourceClaim:
							obj.Spec = live.(*resourcev1.ResourceClaim).Spec
						}
					}
					live = fm(s.subresource).UpdateNoErrors(live, updated, s.manager)
				}
				accessor, err := meta.Accessor(live)
				if err != nil {
					t.Fatal(err)
				}
				entries := accessor.GetManagedFields()
				for i := range entries {
					entries[i].Time = nil
				}
				return entries
			}
			want := run(upstream)
			got := run(newTypedObjectConverter(upstream))
			if len(want) < 3 {
				t.Fatalf("upstream recorded only %d managers: %+v", len(want), want)
			}
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Errorf("managedFields differ:\nupstream: %+v\nours:     %+v", want, got)
			}
		})
	}
}

// BenchmarkFieldManagerStatusUpdate: the field manager's work on a pod's
// status update, as the simulated kubelet makes it, on upstream's
// converter and on ours.
func BenchmarkFieldManagerStatusUpdate(b *testing.B) {
	upstream := upstreamTypeConverter(b)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		converter managedfields.TypeConverter
	}{{"upstream", upstream}, {"ours", newTypedObjectConverter(upstream)}} {
		b.Run(c.name, func(b *testing.B) {
			fm := func(subresource string) *managedfields.FieldManager {
				fm, err := managedfields.NewDefaultFieldManager(c.converter, runtime.UnsafeObjectConvertor(scheme), scheme, scheme, podKind, podKind.GroupVersion(), subresource, nil)
				if err != nil {
					b.Fatal(err)
				}
				return fm
			}
			main, status := fm(""), fm("status")
			live := main.UpdateNoErrors(withKind(&corev1.Pod{}, podKind), testPod(corev1.PodPending, "i:1"), "client")
			claimed := live.DeepCopyObject().(*corev1.Pod)
			claimed.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu")}}
			live = status.UpdateNoErrors(live, claimed, "controller")
			running := live.DeepCopyObject().(*corev1.Pod)
			running.Status.Phase = corev1.PodRunning
			running.Status.Conditions = append(running.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			b.ReportAllocs()
			for b.Loop() {
				// As decoded from the request: nothing shared with live.
				status.UpdateNoErrors(live, running.DeepCopy(), "kubelet")
			}
		})
	}
}
