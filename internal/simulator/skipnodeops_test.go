package simulator

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/record"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver/drivertesting"
	"github.com/draplane/draplane/internal/features"
)

// TestPrepareSkipNodeOperations: as upstream's kubelet, the simulated node
// does not call the driver for an operation that every device of the
// driver in a claim lists in skipNodeOperations; with
// DRAOptionalNodeOperations off a claim that lists any is refused.
func TestPrepareSkipNodeOperations(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec: corev1.PodSpec{NodeName: "sim-node-0", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "a", ResourceClaimName: ptr.To("claim-a")},
				{Name: "b", ResourceClaimName: ptr.To("claim-b")},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	// claim has one device of the driver per entry of skips.
	claim := func(name string, skips ...[]resourcev1.SkipNodeOperation) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
			Status: resourcev1.ResourceClaimStatus{
				Allocation:  &resourcev1.AllocationResult{},
				ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}},
			},
		}
		for i, skip := range skips {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
				Request: "gpu", Driver: driver, Pool: "sim-node-0", Device: "gpu-" + string(rune('0'+i)), SkipNodeOperations: skip})
		}
		return c
	}
	all := []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationAll}
	unprepareOnly := []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationNodeUnprepareResources}
	both := []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationNodePrepareResources, resourcev1.SkipNodeOperationNodeUnprepareResources}
	tests := map[string]struct {
		gateOff                     bool
		claimA                      *resourcev1.ResourceClaim
		wantPrepared, wantUnprepare string // claim names of the one call, "" for none
		wantEvent                   string
	}{
		"no skips":                       {claimA: claim("claim-a", nil), wantPrepared: "claim-a,claim-b", wantUnprepare: "claim-a,claim-b"},
		"skip all":                       {claimA: claim("claim-a", all), wantPrepared: "claim-b", wantUnprepare: "claim-b"},
		"skip both by name":              {claimA: claim("claim-a", both), wantPrepared: "claim-b", wantUnprepare: "claim-b"},
		"skip unprepare only":            {claimA: claim("claim-a", unprepareOnly), wantPrepared: "claim-a,claim-b", wantUnprepare: "claim-b"},
		"one of two devices skips":       {claimA: claim("claim-a", all, nil), wantPrepared: "claim-a,claim-b", wantUnprepare: "claim-a,claim-b"},
		"both devices skip, differently": {claimA: claim("claim-a", all, both), wantPrepared: "claim-b", wantUnprepare: "claim-b"},
		"gate off: refused": {gateOff: true, claimA: claim("claim-a", all),
			wantEvent: "Warning FailedPrepareDynamicResources Failed to prepare claim claim-a with driver gpu.sim.draplane.dev: skipNodeOperations is set but the DRAOptionalNodeOperations feature gate is off"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAOptionalNodeOperations, !tc.gateOff)
			preparer := &drivertesting.RecordingPreparer{}
			h := newSimulator(t, Options{Nodes: 1, DevicesPerNode: 2, Driver: driver, Preparer: preparer}, []runtime.Object{pod}, nil)
			recorder := record.NewFakeRecorder(10)
			h.sim.agent.SetRecorder(recorder)
			if err := h.pods.Add(pod); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*resourcev1.ResourceClaim{tc.claimA, claim("claim-b", nil)} {
				if err := h.claims.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			_, err := h.sim.agent.SyncPod(h.ctx, "ns/p")
			if (err != nil) != (tc.wantEvent != "") {
				t.Errorf("sync error %v", err)
			}
			if got := calls(preparer.PrepareCalls()); got != tc.wantPrepared {
				t.Errorf("prepare call for %q, want %q", got, tc.wantPrepared)
			}
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
			}
			if strings.Join(events, "|") != tc.wantEvent {
				t.Errorf("events %q, want %q", events, tc.wantEvent)
			}
			if tc.wantEvent != "" {
				return
			}
			if err := h.pods.Delete(pod); err != nil {
				t.Fatal(err)
			}
			if _, err := h.sim.agent.SyncPod(h.ctx, "ns/p"); err != nil {
				t.Fatal(err)
			}
			if got := calls(preparer.UnprepareCalls()); got != tc.wantUnprepare {
				t.Errorf("unprepare call for %q, want %q", got, tc.wantUnprepare)
			}
		})
	}
}

// calls joins the claim names of at most one call.
func calls(recorded [][]string) string {
	if len(recorded) > 1 {
		return "more than one call"
	}
	if len(recorded) == 0 {
		return ""
	}
	return strings.Join(recorded[0], ",")
}

// TestSeedSkipNodeOperations: the simulated slices carry the configured
// skipNodeOperations.
func TestSeedSkipNodeOperations(t *testing.T) {
	for _, skip := range [][]resourcev1.SkipNodeOperation{nil, {resourcev1.SkipNodeOperationAll}} {
		h := newSimulator(t, Options{Nodes: 1, DevicesPerNode: 1, Driver: driver, SkipNodeOperations: skip}, nil, nil)
		if err := h.sim.Seed(h.ctx); err != nil {
			t.Fatal(err)
		}
		got, err := h.resource.ResourceV1().ResourceSlices().Get(h.ctx, SliceName("sim-node-0", driver), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Spec.SkipNodeOperations) != fmt.Sprint(skip) {
			t.Errorf("skipNodeOperations %v, want %v", got.Spec.SkipNodeOperations, skip)
		}
	}
}
