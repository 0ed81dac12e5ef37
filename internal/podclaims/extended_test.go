package podclaims

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

func container(name string, requests map[string]string) corev1.Container {
	c := corev1.Container{Name: name}
	if requests != nil {
		c.Resources.Requests = corev1.ResourceList{}
		for resourceName, quantity := range requests {
			c.Resources.Requests[corev1.ResourceName(resourceName)] = resource.MustParse(quantity)
		}
	}
	return c
}

func sidecar(c corev1.Container) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func class(name, extendedResourceName string, created time.Time) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if extendedResourceName != "" {
		c.Spec.ExtendedResourceName = &extendedResourceName
	}
	return c
}

func exactly(name, className string, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: className, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
	}}
}

func mapping(containerName, resourceName, requestName string) corev1.ContainerExtendedResourceRequest {
	return corev1.ContainerExtendedResourceRequest{ContainerName: containerName, ResourceName: resourceName, RequestName: requestName}
}

func TestExtendedResourceRequests(t *testing.T) {
	now := time.Now()
	resolver := NewClassResolver([]*resourcev1.DeviceClass{
		class("gpu", "example.com/gpu", now),
		class("nic", "", now),
	})
	tests := []struct {
		name             string
		init, containers []corev1.Container
		wantRequests     []resourcev1.DeviceRequest
		wantMappings     []corev1.ContainerExtendedResourceRequest
		wantNeeded       bool
	}{{
		name:         "one container asks for two",
		containers:   []corev1.Container{container("c", map[string]string{"example.com/gpu": "2", "cpu": "1"})},
		wantRequests: []resourcev1.DeviceRequest{exactly("container-0-request-1", "gpu", 2)},
		wantMappings: []corev1.ContainerExtendedResourceRequest{mapping("c", "example.com/gpu", "container-0-request-1")},
		wantNeeded:   true,
	}, {
		name: "containers add up, implicit class name",
		containers: []corev1.Container{
			container("a", map[string]string{"example.com/gpu": "1"}),
			container("b", map[string]string{"example.com/gpu": "2", "deviceclass.resource.kubernetes.io/nic": "1"}),
		},
		wantRequests: []resourcev1.DeviceRequest{
			exactly("container-0-request-0", "gpu", 1),
			exactly("container-1-request-0", "nic", 1),
			exactly("container-1-request-1", "gpu", 2),
		},
		wantMappings: []corev1.ContainerExtendedResourceRequest{
			mapping("b", "deviceclass.resource.kubernetes.io/nic", "container-1-request-0"),
			mapping("a", "example.com/gpu", "container-0-request-0"),
			mapping("b", "example.com/gpu", "container-1-request-1"),
		},
		wantNeeded: true,
	}, {
		name:       "init container reuses the devices of a later container",
		init:       []corev1.Container{container("init", map[string]string{"example.com/gpu": "1"})},
		containers: []corev1.Container{container("main", map[string]string{"example.com/gpu": "2"})},
		wantRequests: []resourcev1.DeviceRequest{
			exactly("container-1-request-0", "gpu", 2),
		},
		wantMappings: []corev1.ContainerExtendedResourceRequest{
			mapping("main", "example.com/gpu", "container-1-request-0"),
			mapping("init", "example.com/gpu", "container-1-request-0"),
		},
		wantNeeded: true,
	}, {
		name: "init containers take the largest rest once, sidecars add up",
		init: []corev1.Container{
			container("init-a", map[string]string{"example.com/gpu": "3"}),
			sidecar(container("sidecar", map[string]string{"example.com/gpu": "1"})),
			container("init-b", map[string]string{"example.com/gpu": "4"}),
		},
		containers: []corev1.Container{container("main", map[string]string{"example.com/gpu": "1"})},
		wantRequests: []resourcev1.DeviceRequest{
			// init-a: 3 - sidecar 1 - main 1 = 1; init-b: 4 - main 1 = 3.
			exactly("container-1-request-0", "gpu", 1),
			exactly("container-2-request-0", "gpu", 3),
			exactly("container-3-request-0", "gpu", 1),
		},
		wantMappings: []corev1.ContainerExtendedResourceRequest{
			mapping("sidecar", "example.com/gpu", "container-1-request-0"),
			mapping("main", "example.com/gpu", "container-3-request-0"),
			mapping("init-a", "example.com/gpu", "container-1-request-0"),
			mapping("init-a", "example.com/gpu", "container-3-request-0"),
			mapping("init-a", "example.com/gpu", "container-2-request-0"),
			mapping("init-b", "example.com/gpu", "container-3-request-0"),
			mapping("init-b", "example.com/gpu", "container-2-request-0"),
		},
		wantNeeded: true,
	}, {
		name:       "no class backs the resource",
		containers: []corev1.Container{container("c", map[string]string{"example.com/fpga": "1", "cpu": "1"})},
	}, {
		name:       "zero is no request",
		containers: []corev1.Container{container("c", map[string]string{"example.com/gpu": "0"})},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.containers}}
			if got := NeedsExtendedResourceClaim(pod, resolver); got != tc.wantNeeded {
				t.Errorf("NeedsExtendedResourceClaim: expected %v, got %v", tc.wantNeeded, got)
			}
			requests, mappings := ExtendedResourceRequests(pod, resolver)
			if diff := cmp.Diff(tc.wantRequests, requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMappings, mappings); diff != "" {
				t.Errorf("mappings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassResolver(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	now := time.Now()
	tests := []struct {
		name    string
		classes []*resourcev1.DeviceClass
		lookup  corev1.ResourceName
		want    string
	}{
		{"explicit name", []*resourcev1.DeviceClass{class("a", "example.com/gpu", now)}, "example.com/gpu", "a"},
		{"implicit name", []*resourcev1.DeviceClass{class("a", "example.com/gpu", now)}, "deviceclass.resource.kubernetes.io/a", "a"},
		{"unknown", []*resourcev1.DeviceClass{class("a", "example.com/gpu", now)}, "example.com/fpga", ""},
		{"newest wins", []*resourcev1.DeviceClass{class("new", "example.com/gpu", now), class("old", "example.com/gpu", old)}, "example.com/gpu", "new"},
		{"newest wins in any order", []*resourcev1.DeviceClass{class("old", "example.com/gpu", old), class("new", "example.com/gpu", now)}, "example.com/gpu", "new"},
		{"lower name among equals", []*resourcev1.DeviceClass{class("b", "example.com/gpu", now), class("a", "example.com/gpu", now)}, "example.com/gpu", "a"},
		{"an older clash keeps its implicit name", []*resourcev1.DeviceClass{class("old", "example.com/gpu", old), class("new", "example.com/gpu", now)}, "deviceclass.resource.kubernetes.io/old", "old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if c := NewClassResolver(tc.classes).Class(tc.lookup); c != nil {
				got = c.Name
			}
			if got != tc.want {
				t.Errorf("expected class %q, got %q", tc.want, got)
			}
		})
	}
}

func TestIsExtendedResourceCandidate(t *testing.T) {
	for name, want := range map[corev1.ResourceName]bool{
		"example.com/gpu":                        true,
		"deviceclass.resource.kubernetes.io/gpu": true,
		"cpu":                                    false,
		"kubernetes.io/gpu":                      false,
		"hugepages-2Mi":                          false,
		"requests.example.com/gpu":               false,
		"example.com/-gpu":                       false,
	} {
		if got := IsExtendedResourceCandidate(name); got != want {
			t.Errorf("%s: expected %v, got %v", name, want, got)
		}
	}
}

func TestClaimsOfExtendedResources(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns"},
		Spec:       corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptrTo("shared")}}},
	}
	if got := ClaimsOf(pod); len(got) != 1 {
		t.Fatalf("without status: expected 1 claim, got %+v", got)
	}
	extended := PodClaim{Name: ExtendedResourcesPodClaim, ExtendedResources: true}
	if _, _, err := ClaimName(pod, extended); !errors.Is(err, ErrClaimNotGenerated) {
		t.Errorf("without status: expected ErrClaimNotGenerated, got %v", err)
	}

	pod.Spec.ResourceClaims = nil
	pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{
		ResourceClaimName: "pod-extended-resources-abcde",
		RequestMappings:   []corev1.ContainerExtendedResourceRequest{mapping("c", "example.com/gpu", "container-0-request-0")},
	}
	if !HasClaims(pod) {
		t.Error("HasClaims: expected true for a pod with an extended resource claim")
	}
	claims := ClaimsOf(pod)
	if diff := cmp.Diff([]PodClaim{extended}, claims, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Fatalf("ClaimsOf (-want +got):\n%s", diff)
	}
	name, mustCheckOwner, err := ClaimName(pod, claims[0])
	if err != nil || name == nil || *name != "pod-extended-resources-abcde" || !mustCheckOwner {
		t.Errorf("ClaimName: expected the recorded claim, owner checked; got %v, %v, %v", deref(name), mustCheckOwner, err)
	}
}
