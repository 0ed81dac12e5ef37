package podmode

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/draplane/draplane/internal/podclaims"
)

func ptrTo[T any](v T) *T { return &v }

func TestNotPlaceable(t *testing.T) {
	gates := func(names ...string) *corev1.Pod {
		pod := &corev1.Pod{}
		for _, name := range names {
			pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: name})
		}
		return pod
	}
	tests := map[string]struct {
		pod                    *corev1.Pod
		standalone, aggregated bool // placeable
	}{
		"no gates":       {pod: gates(), standalone: true},
		"our gate":       {pod: gates(podclaims.SchedulingGate), aggregated: true},
		"other gate":     {pod: gates("example.com/other")},
		"ours and other": {pod: gates(podclaims.SchedulingGate, "example.com/other")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Standalone.NotPlaceable(tc.pod) == ""; got != tc.standalone {
				t.Errorf("standalone: expected placeable=%v, got %v", tc.standalone, got)
			}
			if got := Aggregated.NotPlaceable(tc.pod) == ""; got != tc.aggregated {
				t.Errorf("aggregated: expected placeable=%v, got %v", tc.aggregated, got)
			}
		})
	}
}

func TestRequireNode(t *testing.T) {
	ours := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}
	zone := corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}
	required := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	tests := map[string]struct {
		affinity *corev1.Affinity
		expected *corev1.Affinity
		changed  bool
	}{
		"no affinity": {
			expected: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{ours}}),
			changed:  true,
		},
		"existing terms are narrowed, not added to": {
			affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}),
			expected: required(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}, MatchFields: []corev1.NodeSelectorRequirement{ours}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}, MatchFields: []corev1.NodeSelectorRequirement{ours}}),
			changed: true,
		},
		"already pinned": {
			affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{ours}}),
			expected: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{ours}}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: tc.affinity}}
			if changed := RequireNode(pod, "node-a"); changed != tc.changed {
				t.Errorf("expected changed=%v, got %v", tc.changed, changed)
			}
			if !reflect.DeepEqual(pod.Spec.Affinity, tc.expected) {
				t.Errorf("expected %+v, got %+v", tc.expected, pod.Spec.Affinity)
			}
		})
	}
}

func hostPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns", UID: "uid-1", ResourceVersion: "1",
			Annotations: map[string]string{podclaims.ClaimsAnnotation: `[{"name":"gpu","resourceClaimTemplateName":"t"}]`}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: podclaims.SchedulingGate}, {Name: "example.com/other"}}},
	}
}

func TestAggregatedPlace(t *testing.T) {
	tests := map[string]struct {
		stored       *corev1.Pod // nil: as hostPod
		conflicts    int
		expectErr    bool
		expectUpdate bool
	}{
		"pins and ungates":    {expectUpdate: true},
		"retries on conflict": {conflicts: 2, expectUpdate: true},
		"bound to the node":   {stored: func() *corev1.Pod { p := hostPod(); p.Spec.NodeName = "node-a"; p.Spec.SchedulingGates = nil; return p }(), conflicts: 1},
		"bound elsewhere":     {stored: func() *corev1.Pod { p := hostPod(); p.Spec.NodeName = "node-b"; p.Spec.SchedulingGates = nil; return p }(), conflicts: 1, expectErr: true},
		"replaced by new pod": {stored: func() *corev1.Pod { p := hostPod(); p.UID = "uid-2"; return p }(), conflicts: 1, expectErr: true},
		"gives up eventually": {conflicts: 100, expectErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			stored := tc.stored
			if stored == nil {
				stored = hostPod()
			}
			client := kubefake.NewClientset(stored)
			conflicts := tc.conflicts
			client.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if conflicts > 0 {
					conflicts--
					return true, nil, apierrors.NewConflict(corev1.Resource("pods"), "pod", errors.New("changed"))
				}
				return false, nil, nil
			})
			err := Aggregated.Place(ctx, client, hostPod(), "node-a")
			if (err != nil) != tc.expectErr {
				t.Fatalf("expected error %v, got %v", tc.expectErr, err)
			}
			got, getErr := client.CoreV1().Pods("ns").Get(context.Background(), "pod", metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			if !tc.expectUpdate {
				return
			}
			if want := []corev1.PodSchedulingGate{{Name: "example.com/other"}}; !reflect.DeepEqual(got.Spec.SchedulingGates, want) {
				t.Errorf("gates: expected %v, got %v", want, got.Spec.SchedulingGates)
			}
			want := hostPod()
			RequireNode(want, "node-a")
			if !reflect.DeepEqual(got.Spec.Affinity, want.Spec.Affinity) {
				t.Errorf("affinity: expected %+v, got %+v", want.Spec.Affinity, got.Spec.Affinity)
			}
		})
	}
}

func TestRecordGenerated(t *testing.T) {
	generated := []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo("pod-gpu-abc")}}
	tests := map[string]struct {
		mode Mode
		// check inspects the stored pod.
		check func(t *testing.T, pod *corev1.Pod)
	}{
		"standalone writes the status": {
			mode: Standalone,
			check: func(t *testing.T, pod *corev1.Pod) {
				if !reflect.DeepEqual(pod.Status.ResourceClaimStatuses, generated) {
					t.Errorf("expected status %v, got %v", generated, pod.Status.ResourceClaimStatuses)
				}
				if _, ok := pod.Annotations[podclaims.ClaimStatusesAnnotation]; ok {
					t.Error("unexpected annotation")
				}
			},
		},
		"aggregated writes the annotation": {
			mode: Aggregated,
			check: func(t *testing.T, pod *corev1.Pod) {
				var got []corev1.PodResourceClaimStatus
				if err := json.Unmarshal([]byte(pod.Annotations[podclaims.ClaimStatusesAnnotation]), &got); err != nil {
					t.Fatalf("annotation: %v", err)
				}
				if !reflect.DeepEqual(got, generated) {
					t.Errorf("expected annotation %v, got %v", generated, got)
				}
				if pod.Annotations[podclaims.ClaimsAnnotation] == "" {
					t.Error("other annotations must stay")
				}
				if len(pod.Status.ResourceClaimStatuses) != 0 {
					t.Error("unexpected status")
				}
				if !reflect.DeepEqual(podclaims.StatusOf(pod), map[string]*string{"gpu": ptrTo("pod-gpu-abc")}) {
					t.Errorf("StatusOf does not read back what was written: %v", podclaims.StatusOf(pod))
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := kubefake.NewClientset(hostPod())
			if err := tc.mode.RecordGenerated(ctx, client, hostPod(), generated, "test"); err != nil {
				t.Fatal(err)
			}
			pod, err := client.CoreV1().Pods("ns").Get(ctx, "pod", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, pod)
		})
	}
}

// TestStandaloneRecordGeneratedWrites: the claim statuses are written with
// an update of the pod as seen; a pod that changed meanwhile gets them by
// a server-side apply, which keeps the newer rest of the status.
func TestStandaloneRecordGeneratedWrites(t *testing.T) {
	generated := []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo("pod-gpu-abc")}}
	tests := map[string]struct {
		changed   bool // the pod changed after the controller saw it
		wantVerbs []string
	}{
		"pod as seen":       {wantVerbs: []string{"update"}},
		"pod changed since": {changed: true, wantVerbs: []string{"update", "patch"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			stored := hostPod()
			stored.Status.Message = "newer"
			client := kubefake.NewClientset(stored)
			if tc.changed {
				// The server refuses an update based on an older
				// resourceVersion.
				client.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewConflict(corev1.Resource("pods"), "pod", errors.New("changed"))
				})
			}
			client.ClearActions()
			seen := hostPod()
			if err := Standalone.RecordGenerated(ctx, client, seen, generated, "test"); err != nil {
				t.Fatal(err)
			}
			var verbs []string
			for _, action := range client.Actions() {
				if action.GetSubresource() != "status" {
					t.Errorf("unexpected %s of %q", action.GetVerb(), action.GetSubresource())
				}
				verbs = append(verbs, action.GetVerb())
			}
			if !slices.Equal(verbs, tc.wantVerbs) {
				t.Errorf("writes %v, want %v", verbs, tc.wantVerbs)
			}
			pod, err := client.CoreV1().Pods("ns").Get(ctx, "pod", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.Status.ResourceClaimStatuses, generated) {
				t.Errorf("status %v, want %v", pod.Status.ResourceClaimStatuses, generated)
			}
			if tc.changed && pod.Status.Message != "newer" {
				t.Errorf("the newer status message is gone: %q", pod.Status.Message)
			}
		})
	}
}
