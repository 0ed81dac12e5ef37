package server

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// upstreamTypeConverter is the converter the generic server builds for
// pods, ResourceSlices and ResourceClaims.
func upstreamTypeConverter(t *testing.T) managedfields.TypeConverter {
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
