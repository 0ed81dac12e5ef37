package pod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

// TestHugeQuantitiesRefused: a container limit of 1e999999999 cpu is
// refused with a 422 naming it, on create and update, through the real
// store; before, the QoS class and the request/limit comparison computed
// 10^999999999 for minutes.
func TestHugeQuantitiesRefused(t *testing.T) {
	storage := newTestStorage(t)
	ctx := coretesting.Context(t, testNamespace)
	huge := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e999999999")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}
	}
	const field = "spec.containers[0].resources.limits[cpu]"
	_, err := storage.Pod.Create(ctx, newPod("huge", huge), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	assertInvalidField(t, err, field)

	created := createPod(ctx, t, storage, newPod("normal"))
	update := created.DeepCopy()
	huge(update)
	_, _, err = storage.Pod.Update(ctx, "normal", rest.DefaultUpdatedObjectInfo(update), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	assertInvalidField(t, err, field)
}
