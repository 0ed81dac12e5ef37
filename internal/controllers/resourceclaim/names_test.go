package resourceclaim

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestClaimGenerateName(t *testing.T) {
	tests := map[string]struct {
		podName, podClaimName string
		expected              string
	}{
		"short": {
			podName: "my-pod", podClaimName: "resource-1a",
			expected: "my-pod-resource-1a-",
		},
		"exactly at the limit": {
			podName: strings.Repeat("p", 40), podClaimName: strings.Repeat("c", 16),
			expected: strings.Repeat("p", 40) + "-" + strings.Repeat("c", 16) + "-",
		},
		"long pod name, short claim name keeps the claim name": {
			podName: strings.Repeat("p", 200), podClaimName: "gpu",
			expected: strings.Repeat("p", 53) + "-gpu-",
		},
		"short pod name, long claim name keeps the pod name": {
			podName: "pod", podClaimName: strings.Repeat("c", 63),
			expected: "pod-" + strings.Repeat("c", 53) + "-",
		},
		"both long share equally": {
			podName: strings.Repeat("p", 100), podClaimName: strings.Repeat("c", 63),
			expected: strings.Repeat("p", 28) + "-" + strings.Repeat("c", 28) + "-",
		},
		"cut at a dot in the pod name": {
			podName: strings.Repeat("p", 27) + "." + strings.Repeat("q", 60), podClaimName: strings.Repeat("c", 40),
			expected: strings.Repeat("p", 27) + "-" + strings.Repeat("c", 28) + "-",
		},
		"cut at hyphens in both names": {
			podName: strings.Repeat("p", 26) + "--" + strings.Repeat("q", 60), podClaimName: strings.Repeat("c", 27) + "-" + strings.Repeat("d", 40),
			expected: strings.Repeat("p", 26) + "-" + strings.Repeat("c", 27) + "-",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			actual := claimGenerateName(tc.podName, tc.podClaimName)
			if actual != tc.expected {
				t.Errorf("expected %q, got %q", tc.expected, actual)
			}
			// What the server makes of it: five random characters.
			generated := actual + "x7k2q"
			if errs := validation.IsDNS1123Label(generated); len(errs) > 0 {
				t.Errorf("generated name %q is not a valid DNS label: %v", generated, errs)
			}
		})
	}
}
