package corescheme

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDefaultImagePullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"nginx":                            corev1.PullAlways,
		"nginx:latest":                     corev1.PullAlways,
		"nginx:1.27":                       corev1.PullIfNotPresent,
		"localhost:5000/nginx":             corev1.PullAlways,
		"localhost:5000/nginx:latest":      corev1.PullAlways,
		"localhost:5000/nginx:1.27":        corev1.PullIfNotPresent,
		"nginx@sha256:abcdef":              corev1.PullIfNotPresent,
		"registry.example/team/app:v2-rc1": corev1.PullIfNotPresent,
	} {
		if got := DefaultImagePullPolicy(image); got != want {
			t.Errorf("%s: got %s, want %s", image, got, want)
		}
	}
}

func TestSetDefaultsNode(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	SetDefaultsNode(node)
	if got := node.Status.Allocatable[corev1.ResourceCPU]; got.String() != "4" {
		t.Errorf("allocatable cpu %s, want 4", got.String())
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	SetDefaultsNode(node)
	if got := node.Status.Allocatable[corev1.ResourceCPU]; got.String() != "3" {
		t.Errorf("allocatable cpu overwritten: %s", got.String())
	}
}
