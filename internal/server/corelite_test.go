package server

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/inprocess"
)

// TestCoreLiteAdmission checks which operations the admission chain
// takes (no updates: the API handlers would decode every update's
// managedFields again after mutating admission; the node restriction's
// checks of updates run in the stores) and the premise of leaving updates
// out of NamespaceLifecycle: the plugin allows any update, even in a
// namespace it has never seen.
func TestCoreLiteAdmission(t *testing.T) {
	shared := &inprocess.Informers{
		Kube:     informers.NewSharedInformerFactory(kubefake.NewClientset(), 0),
		Resource: resourceinformers.NewSharedInformerFactory(resourcefake.NewSimpleClientset(), 0),
	}
	_, chain, err := NewCoreLite(&rest.Config{Host: "https://127.0.0.1:1"}, shared, node.NewAdmission())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := chain.(admission.MutationInterface); !ok {
		t.Fatal("the chain does not admit in the mutating phase")
	}
	for _, tc := range []struct {
		operation admission.Operation
		handles   bool
	}{
		{admission.Create, true},
		{admission.Delete, true},
		{admission.Update, false},
		{admission.Connect, false},
	} {
		if got := chain.Handles(tc.operation); got != tc.handles {
			t.Errorf("Handles(%s) = %v, want %v", tc.operation, got, tc.handles)
		}
	}

	plugin := chain.(admission.MutationInterface)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "nowhere"}}
	for _, resource := range []string{"pods", "namespaces"} {
		gvk := corev1.SchemeGroupVersion.WithKind("Pod")
		if resource == "namespaces" {
			gvk = corev1.SchemeGroupVersion.WithKind("Namespace")
		}
		attrs := admission.NewAttributesRecord(pod, pod.DeepCopy(), gvk, "nowhere", "p",
			corev1.SchemeGroupVersion.WithResource(resource), "", admission.Update, &metav1.UpdateOptions{}, false, nil)
		// The informers never started: an answer that needed the
		// namespace would be an error.
		if err := plugin.Admit(context.Background(), attrs, nil); err != nil {
			t.Errorf("NamespaceLifecycle refused an update of %s: %v", resource, err)
		}
	}
}
