package core

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/registry/core/event"
	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
	"github.com/draplane/draplane/internal/registry/core/namespace"
	"github.com/draplane/draplane/internal/registry/core/node"
	"github.com/draplane/draplane/internal/registry/core/pod"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func TestAddToSchemeRegistersRealAndInternalVersions(t *testing.T) {
	scheme := newScheme(t)
	for _, tc := range []struct {
		group string
		kinds []string
	}{
		{group: "", kinds: []string{"Pod", "PodList", "Namespace", "NamespaceList", "Node", "NodeList", "Event", "EventList", "Binding"}},
		{group: "policy", kinds: []string{"Eviction"}},
		{group: "coordination.k8s.io", kinds: []string{"Lease", "LeaseList"}},
	} {
		for _, kind := range tc.kinds {
			for _, version := range []string{"v1", runtime.APIVersionInternal} {
				gvk := schema.GroupVersionKind{Group: tc.group, Version: version, Kind: kind}
				if !scheme.Recognizes(gvk) {
					t.Errorf("%s not registered", gvk)
				}
			}
		}
	}
	if !scheme.Recognizes(corev1.SchemeGroupVersion.WithKind("DeleteOptions")) || !scheme.Recognizes(corev1.SchemeGroupVersion.WithKind("ListOptions")) {
		t.Error("meta option types not registered in core/v1")
	}
}

func TestDecodeDefaultsAndRelabels(t *testing.T) {
	codecs := serializer.NewCodecFactory(newScheme(t))
	podJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"app"}]}}`
	obj, gvk, err := codecs.UniversalDecoder(corescheme.CoreInternal).Decode([]byte(podJSON), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	decoded, ok := obj.(*corev1.Pod)
	if !ok {
		t.Fatalf("decoded %T (%v), want *v1.Pod", obj, gvk)
	}
	if decoded.Spec.SchedulerName != "default-scheduler" || decoded.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("decoded pod not defaulted: %+v", decoded.Spec)
	}
	nsJSON := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns"}}`
	obj, _, err = codecs.UniversalDecoder(corescheme.CoreInternal).Decode([]byte(nsJSON), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if phase := obj.(*corev1.Namespace).Status.Phase; phase != corev1.NamespaceActive {
		t.Errorf("namespace phase %q, want Active", phase)
	}
	evictionJSON := `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"ns"},"deleteOptions":{"gracePeriodSeconds":0}}`
	obj, _, err = codecs.UniversalDecoder(corescheme.PolicyInternal).Decode([]byte(evictionJSON), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if eviction := obj.(*policyv1.Eviction); eviction.DeleteOptions == nil || *eviction.DeleteOptions.GracePeriodSeconds != 0 {
		t.Errorf("eviction delete options lost: %+v", eviction)
	}
}

func TestFieldLabelConversion(t *testing.T) {
	scheme := newScheme(t)
	for _, tc := range []struct {
		kind  schema.GroupVersionKind
		label string
		want  string // "" means rejected
	}{
		{corev1.SchemeGroupVersion.WithKind("Pod"), "spec.nodeName", "spec.nodeName"},
		{corev1.SchemeGroupVersion.WithKind("Pod"), "spec.host", "spec.nodeName"},
		{corev1.SchemeGroupVersion.WithKind("Pod"), "status.phase", "status.phase"},
		{corev1.SchemeGroupVersion.WithKind("Pod"), "spec.schedulerName", "spec.schedulerName"},
		{corev1.SchemeGroupVersion.WithKind("Pod"), "spec.containers", ""},
		{corev1.SchemeGroupVersion.WithKind("Event"), "involvedObject.kind", "involvedObject.kind"},
		{corev1.SchemeGroupVersion.WithKind("Event"), "involvedObject.uid", "involvedObject.uid"},
		{corev1.SchemeGroupVersion.WithKind("Event"), "reason", "reason"},
		{corev1.SchemeGroupVersion.WithKind("Event"), "message", ""},
		{corev1.SchemeGroupVersion.WithKind("Node"), "spec.unschedulable", "spec.unschedulable"},
		{corev1.SchemeGroupVersion.WithKind("Node"), "spec.podCIDR", ""},
		{corev1.SchemeGroupVersion.WithKind("Namespace"), "status.phase", "status.phase"},
		{corev1.SchemeGroupVersion.WithKind("Namespace"), "name", "metadata.name"},
		{coordinationv1.SchemeGroupVersion.WithKind("Lease"), "metadata.name", "metadata.name"},
	} {
		got, _, err := scheme.ConvertFieldLabel(tc.kind, tc.label, "x")
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s %s: accepted, want rejected", tc.kind.Kind, tc.label)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s %s: got %q, %v; want %q", tc.kind.Kind, tc.label, got, err, tc.want)
		}
	}
}

// Every field label the scheme accepts must be produced by the strategy's
// attrs func, or selecting on it would match nothing. A pod's set leaves
// out empty fields (a selector reads a missing field as empty), so the pod
// has every selectable field set.
func TestFieldLabelsMatchSelectableFields(t *testing.T) {
	fullPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "n", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "s",
			ServiceAccountName: "sa", HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", NominatedNodeName: "m"},
	}
	for _, tc := range []struct {
		kind   string
		labels sets.Set[string]
		fields func() []string
	}{
		{"Pod", corescheme.PodFieldLabels, func() []string { return keys(pod.ToSelectableFields(fullPod)) }},
		{"Event", corescheme.EventFieldLabels, func() []string { return keys(event.ToSelectableFields(&corev1.Event{})) }},
		{"Node", corescheme.NodeFieldLabels, func() []string { return keys(node.ToSelectableFields(&corev1.Node{})) }},
		{"Namespace", corescheme.NamespaceFieldLabels, func() []string { return keys(namespace.ToSelectableFields(&corev1.Namespace{})) }},
	} {
		if got := sets.New(tc.fields()...); !got.Equal(tc.labels) {
			t.Errorf("%s: selectable fields %v, field labels %v", tc.kind, sets.List(got), sets.List(tc.labels))
		}
	}
}

func keys[M ~map[string]string](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestStorageMaps(t *testing.T) {
	optsGetter := coretesting.NewRESTOptionsGetter(t)
	legacy, err := NewLegacyStorage(optsGetter)
	if err != nil {
		t.Fatal(err)
	}
	coordination, err := NewCoordinationStorage(optsGetter)
	if err != nil {
		t.Fatal(err)
	}
	for _, storage := range []map[string]rest.Storage{legacy, coordination} {
		for _, s := range storage {
			t.Cleanup(s.Destroy)
		}
	}
	wantLegacy := []string{"namespaces", "namespaces/status", "namespaces/finalize", "pods", "pods/status", "pods/binding", "pods/eviction", "nodes", "nodes/status", "events"}
	if got := sets.KeySet(legacy); !got.Equal(sets.New(wantLegacy...)) {
		t.Errorf("legacy storage keys %v, want %v", sets.List(got), wantLegacy)
	}
	if got := sets.KeySet(coordination); !got.Equal(sets.New("leases")) {
		t.Errorf("coordination storage keys %v, want [leases]", sets.List(got))
	}

	shortNames := map[string][]string{"namespaces": {"ns"}, "pods": {"po"}, "nodes": {"no"}, "events": {"ev"}}
	for resource, want := range shortNames {
		provider, ok := legacy[resource].(rest.ShortNamesProvider)
		if !ok || !sets.New(provider.ShortNames()...).Equal(sets.New(want...)) {
			t.Errorf("%s: short names %v, want %v", resource, provider, want)
		}
	}
	if provider, ok := legacy["pods"].(rest.CategoriesProvider); !ok || !sets.New(provider.Categories()...).Has("all") {
		t.Error("pods are not in category all")
	}
	if provider, ok := legacy["pods/eviction"].(rest.GroupVersionKindProvider); !ok ||
		provider.GroupVersionKind(corev1.SchemeGroupVersion) != policyv1.SchemeGroupVersion.WithKind("Eviction") {
		t.Error("pods/eviction does not announce policy/v1 Eviction")
	}
	for _, resource := range []string{"pods/binding", "pods/eviction"} {
		if _, ok := legacy[resource].(rest.NamedCreater); !ok {
			t.Errorf("%s is not a NamedCreater", resource)
		}
	}
	for _, resource := range []string{"pods/status", "nodes/status", "namespaces/status", "namespaces/finalize"} {
		if _, ok := legacy[resource].(rest.Updater); !ok {
			t.Errorf("%s is not an Updater", resource)
		}
	}
	for resource, s := range legacy {
		if _, isCollection := s.(rest.Lister); isCollection {
			if _, ok := s.(rest.TableConvertor); !ok {
				t.Errorf("%s has no table convertor", resource)
			}
		}
	}
}
