package podclaims

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

func ptrTo[T any](v T) *T { return &v }

func TestClaimName(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns", UID: "uid-pod"},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
			{Name: "shared", ResourceClaimName: ptrTo("shared-claim")},
			{Name: "generated", ResourceClaimTemplateName: ptrTo("template")},
			{Name: "not-needed", ResourceClaimTemplateName: ptrTo("template")},
			{Name: "pending", ResourceClaimTemplateName: ptrTo("template")},
			{Name: "future"},
		}},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{
			{Name: "generated", ResourceClaimName: ptrTo("pod-generated-abcde")},
			{Name: "not-needed"},
		}},
	}
	tests := map[string]struct {
		expectedName   *string
		mustCheckOwner bool
		expectedErr    error
	}{
		"shared":     {expectedName: ptrTo("shared-claim")},
		"generated":  {expectedName: ptrTo("pod-generated-abcde"), mustCheckOwner: true},
		"not-needed": {mustCheckOwner: true},
		"pending":    {expectedErr: ErrClaimNotGenerated},
		"future":     {expectedErr: ErrUnsupportedPodClaim},
	}
	claims := ClaimsOf(pod)
	if len(claims) != len(tests) {
		t.Fatalf("ClaimsOf: expected %d claims, got %d", len(tests), len(claims))
	}
	for _, podClaim := range claims {
		t.Run(podClaim.Name, func(t *testing.T) {
			tc := tests[podClaim.Name]
			name, mustCheckOwner, err := ClaimName(pod, podClaim)
			if !errors.Is(err, tc.expectedErr) {
				t.Fatalf("expected error %v, got %v", tc.expectedErr, err)
			}
			if (name == nil) != (tc.expectedName == nil) || (name != nil && *name != *tc.expectedName) {
				t.Errorf("expected name %v, got %v", deref(tc.expectedName), deref(name))
			}
			if err == nil && mustCheckOwner != tc.mustCheckOwner {
				t.Errorf("expected mustCheckOwner %v, got %v", tc.mustCheckOwner, mustCheckOwner)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestOwnership(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns", UID: "uid-pod"}}
	owner := func(apiVersion, kind string, uid string, controller bool) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "pod", UID: k8stypes.UID("uid-" + uid), Controller: &controller}}}}
	}
	tests := map[string]struct {
		claim     *resourcev1.ResourceClaim
		isForPod  bool
		ownerName string
	}{
		"owned":          {claim: owner("v1", "Pod", "pod", true), isForPod: true, ownerName: "pod"},
		"other instance": {claim: owner("v1", "Pod", "old", true), ownerName: "pod"},
		"not controller": {claim: owner("v1", "Pod", "pod", false)},
		"other kind":     {claim: owner("apps/v1", "ReplicaSet", "pod", true)},
		"no owner":       {claim: &resourcev1.ResourceClaim{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := IsForPod(pod, tc.claim); (err == nil) != tc.isForPod {
				t.Errorf("IsForPod: expected %v, got error %v", tc.isForPod, err)
			}
			if podName, _ := OwningPod(tc.claim); podName != tc.ownerName {
				t.Errorf("OwningPod: expected %q, got %q", tc.ownerName, podName)
			}
		})
	}
}

func TestIsDone(t *testing.T) {
	now := metav1.Now()
	tests := map[string]struct {
		pod  corev1.Pod
		done bool
	}{
		"pending":            {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}},
		"running":            {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
		"succeeded":          {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, done: true},
		"failed":             {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, done: true},
		"deleted, not bound": {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, done: true},
		"deleted, bound":     {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "node"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if IsDone(&tc.pod) != tc.done {
				t.Errorf("expected %v", tc.done)
			}
		})
	}
}
