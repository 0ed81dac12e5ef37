package podclaims

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClaimsOfAnnotation(t *testing.T) {
	tests := map[string]struct {
		spec       []corev1.PodResourceClaim
		annotation *string
		expected   []PodClaim
		invalid    bool
	}{
		"none": {},
		"spec only": {
			spec:     []corev1.PodResourceClaim{{Name: "a", ResourceClaimName: ptrTo("c")}},
			expected: []PodClaim{{Name: "a", ClaimName: ptrTo("c")}},
		},
		"annotation only": {
			annotation: ptrTo(`[{"name":"gpu","resourceClaimTemplateName":"t"},{"name":"shared","resourceClaimName":"c"}]`),
			expected:   []PodClaim{{Name: "gpu", TemplateName: ptrTo("t")}, {Name: "shared", ClaimName: ptrTo("c")}},
		},
		"spec wins on the same name": {
			spec:       []corev1.PodResourceClaim{{Name: "a", ResourceClaimName: ptrTo("from-spec")}},
			annotation: ptrTo(`[{"name":"a","resourceClaimName":"from-annotation"},{"name":"b","resourceClaimName":"c"}]`),
			expected:   []PodClaim{{Name: "a", ClaimName: ptrTo("from-spec")}, {Name: "b", ClaimName: ptrTo("c")}},
		},
		"empty list": {annotation: ptrTo(`[]`), expected: []PodClaim{}},
		"not json":   {annotation: ptrTo(`gpu`), invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns"}, Spec: corev1.PodSpec{ResourceClaims: tc.spec}}
			if tc.annotation != nil {
				pod.Annotations = map[string]string{ClaimsAnnotation: *tc.annotation}
			}
			if got, want := HasClaims(pod), tc.spec != nil || tc.annotation != nil; got != want {
				t.Errorf("HasClaims: expected %v, got %v", want, got)
			}
			claims := ClaimsOf(pod)
			if tc.invalid {
				if len(claims) != 1 || claims[0].Err == nil {
					t.Fatalf("expected one claim with an error, got %+v", claims)
				}
				if _, _, err := ClaimName(pod, claims[0]); err == nil {
					t.Error("ClaimName: expected the annotation's error")
				}
				return
			}
			if !reflect.DeepEqual(claims, tc.expected) {
				t.Errorf("expected %+v, got %+v", tc.expected, claims)
			}
		})
	}
}

func TestStatusOfAnnotation(t *testing.T) {
	tests := map[string]struct {
		status     []corev1.PodResourceClaimStatus
		annotation *string
		expected   map[string]*string
	}{
		"none": {},
		"annotation": {
			annotation: ptrTo(`[{"name":"gpu","resourceClaimName":"pod-gpu-abc"},{"name":"unneeded"}]`),
			expected:   map[string]*string{"gpu": ptrTo("pod-gpu-abc"), "unneeded": nil},
		},
		"status wins": {
			status:     []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo("from-status")}},
			annotation: ptrTo(`[{"name":"gpu","resourceClaimName":"from-annotation"},{"name":"b","resourceClaimName":"x"}]`),
			expected:   map[string]*string{"gpu": ptrTo("from-status"), "b": ptrTo("x")},
		},
		"broken annotation counts as absent": {annotation: ptrTo(`{`), expected: map[string]*string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{ResourceClaimStatuses: tc.status}}
			if tc.annotation != nil {
				pod.Annotations = map[string]string{ClaimStatusesAnnotation: *tc.annotation}
			}
			if got := StatusOf(pod); !reflect.DeepEqual(got, tc.expected) {
				t.Errorf("expected %v, got %v", tc.expected, got)
			}
		})
	}
}
