package podclaims

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAddPodsByClaimIndex: controllers sharing one pod informer share one
// index; adding it again is no error and adds nothing.
func TestAddPodsByClaimIndex(t *testing.T) {
	informer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
	before := len(informer.GetIndexer().GetIndexers())
	for range 2 {
		if err := AddPodsByClaimIndex(informer); err != nil {
			t.Fatalf("AddPodsByClaimIndex: %v", err)
		}
	}
	if got := len(informer.GetIndexer().GetIndexers()) - before; got != 1 {
		t.Errorf("indexes added: %d, want 1", got)
	}

	claim := "shared"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
			{Name: "a", ResourceClaimName: &claim},
			{Name: "b", ResourceClaimTemplateName: &claim}, // not generated yet
		}},
	}
	if err := informer.GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	pods, err := informer.GetIndexer().ByIndex(PodsByClaimIndex, "ns/shared")
	if err != nil || len(pods) != 1 {
		t.Errorf("ByIndex(ns/shared) = %d pods, %v; want the pod", len(pods), err)
	}
	keys, _ := PodsByClaimIndexFunc(pod)
	if len(keys) != 1 || keys[0] != "ns/shared" {
		t.Errorf("PodsByClaimIndexFunc = %q, want [ns/shared]", keys)
	}
}
