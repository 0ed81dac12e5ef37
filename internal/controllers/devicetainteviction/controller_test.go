package devicetainteviction

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	k8stesting "k8s.io/client-go/testing"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/features"
)

// step changes something (or only lets time pass), lets the controller
// work and checks the outcome. Lists are of pod names; wantDeleted holds
// every pod deleted since the start.
type step struct {
	name    string
	do      func(e *testEnv)
	advance time.Duration

	wantDeleted []string
	// wantDeletedCount is checked instead of wantDeleted when > 0, for
	// tests where only the number matters.
	wantDeletedCount int
	wantPending      []string
	// wantCancelled counts cancellation events on pods since the start.
	wantCancelled int
	// wantCondition, when set, is compared with the rule's stored
	// EvictionInProgress condition (status, reason, message).
	wantCondition *metav1.Condition
	// wantStatusWrites, when > 0, is the number of status writes of
	// DeviceTaintRules since the start.
	wantStatusWrites int
}

const ruleName = "maintenance"

func cond(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
	return &metav1.Condition{Status: status, Reason: reason, Message: message}
}

func exists(key string, seconds *int64) resourcev1.DeviceToleration {
	return resourcev1.DeviceToleration{Key: key, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: seconds}
}

func TestEviction(t *testing.T) {
	gpu0 := []string{"gpu-0"}
	otherB := pod("b")
	otherB.UID = "another-b-uid"
	earlyTaint := noExecute("example.com/broken")
	earlyTaint.TimeAdded = &metav1.Time{Time: t0.Add(-3 * time.Second)}
	noSelector := rule(ruleName, "gpu-0", noExecute("example.com/broken"))
	noSelector.Spec.DeviceSelector = nil
	withValue := func(value string) resourcev1.DeviceTaint {
		taint := noExecute("example.com/broken")
		taint.Value = value
		return taint
	}
	fivePods := testObjects{rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))}}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		fivePods.pods = append(fivePods.pods, pod(name))
		fivePods.claims = append(fivePods.claims, claim("claim-"+name, gpu0, consumer(name)))
	}

	inTrain := func(name string) *corev1.Pod {
		p := pod(name)
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		return p
	}
	trainConsumer := resourcev1.ResourceClaimConsumerReference{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "train", UID: "train-uid"}

	tests := map[string]struct {
		opts    Options
		objects testObjects
		steps   []step
		// groupClaims turns DRAWorkloadResourceClaims (and
		// GenericWorkload) on.
		groupClaims bool
	}{
		// A claim reserved for a PodGroup is used by the group's pods:
		// they go, a pod of no group stays.
		"claim reserved for a PodGroup evicts its pods": {
			groupClaims: true,
			objects: testObjects{
				pods:   []*corev1.Pod{inTrain("a"), inTrain("b"), pod("c")},
				claims: []*resourcev1.ResourceClaim{claim("group", gpu0, trainConsumer)},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "the group's pods evicted", wantDeleted: []string{"a", "b"},
				wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 2 pods evicted, 0 evictions cancelled")}},
		},
		"claim reserved for a PodGroup, gate off: nobody evicted": {
			objects: testObjects{
				pods:   []*corev1.Pod{inTrain("a"), inTrain("b")},
				claims: []*resourcev1.ResourceClaim{claim("group", gpu0, trainConsumer)},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "nothing pending"}},
		},
		// The upstream bug: a consumer that is gone must not keep the
		// ones after it from being evicted.
		"shared claim, middle consumer missing": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a"), pod("c")},
				claims: []*resourcev1.ResourceClaim{claim("shared", gpu0, consumer("a"), consumer("b"), consumer("c"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "all others evicted", wantDeleted: []string{"a", "c"},
				wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 2 pods evicted, 0 evictions cancelled")}},
		},
		"shared claim, first consumer missing": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("b"), pod("c")},
				claims: []*resourcev1.ResourceClaim{claim("shared", gpu0, consumer("a"), consumer("b"), consumer("c"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "all others evicted", wantDeleted: []string{"b", "c"}}},
		},
		"shared claim, middle consumer is another pod of that name": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a"), otherB, pod("c")},
				claims: []*resourcev1.ResourceClaim{claim("shared", gpu0, consumer("a"), consumer("b"), consumer("c"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "only the consumers evicted", wantDeleted: []string{"a", "c"}}},
		},
		"tolerationSeconds delays eviction, the smallest counts": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim", gpu0, consumer("a")), exists("example.com/broken", ptr.To[int64](10)), exists("example.com/broken", ptr.To[int64](5)))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{
				{name: "pending", wantPending: []string{"a"},
					wantCondition: cond(metav1.ConditionTrue, ReasonPodsPendingEviction, "1 pods pending eviction, 0 pods evicted, 0 evictions cancelled")},
				{name: "still pending after 4s", advance: 4 * time.Second, wantPending: []string{"a"}},
				{name: "evicted after 5s", advance: time.Second, wantDeleted: []string{"a"},
					wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 1 pods evicted, 0 evictions cancelled")},
			},
		},
		"tolerationSeconds count from timeAdded": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim", gpu0, consumer("a")), exists("example.com/broken", ptr.To[int64](5)))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", earlyTaint)},
			},
			steps: []step{
				{name: "pending", wantPending: []string{"a"}},
				{name: "evicted 2s later", advance: 2 * time.Second, wantDeleted: []string{"a"}},
			},
		},
		"toleration without seconds never evicts": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim", gpu0, consumer("a")), exists("example.com/broken", ptr.To[int64](1)), exists("example.com/broken", nil))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{
				{name: "nothing pending"},
				{name: "nothing after an hour", advance: time.Hour,
					wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 0 pods evicted, 0 evictions cancelled")},
			},
		},
		"toleration of another key or effect does not help": {
			objects: testObjects{
				pods: []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim", gpu0, consumer("a")),
					exists("example.com/other", nil),
					resourcev1.DeviceToleration{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule})},
				rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "evicted at once", wantDeleted: []string{"a"}}},
		},
		"deleting the rule before the time cancels": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a"), pod("b")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("shared", gpu0, consumer("a"), consumer("b")), exists("example.com/broken", ptr.To[int64](5)))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{
				{name: "pending", wantPending: []string{"a", "b"}},
				{name: "rule deleted after 2s", advance: 2 * time.Second, do: func(e *testEnv) {
					obj, _, _ := e.rules.GetByKey(ruleName)
					_ = e.rules.Delete(obj)
					e.c.onRule(klog.FromContext(e.ctx), obj, nil)
				}, wantCancelled: 2},
				{name: "nothing evicted later", advance: time.Minute, wantCancelled: 2},
			},
		},
		"removing the slice taint before the time cancels": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim", gpu0, consumer("a")), exists("example.com/broken", ptr.To[int64](5)))},
				slices: []*resourcev1.ResourceSlice{slice("node-1-gpus", 1, 2, noExecute("example.com/broken"))},
			},
			steps: []step{
				{name: "pending", wantPending: []string{"a"}},
				{name: "taint removed", advance: time.Second, do: func(e *testEnv) {
					old, _, _ := e.slices.GetByKey("node-1-gpus")
					updated := slice("node-1-gpus", 1, 2)
					_ = e.slices.Update(updated)
					e.c.onSlice(klog.FromContext(e.ctx), old, updated)
				}, wantCancelled: 1},
				{name: "nothing evicted later", advance: time.Minute, wantCancelled: 1},
			},
		},
		"taint becoming tolerated cancels and is counted": {
			objects: testObjects{
				pods: []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim", gpu0, consumer("a")),
					exists("example.com/broken", ptr.To[int64](5)),
					resourcev1.DeviceToleration{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpEqual, Value: "harmless"})},
				rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", withValue("fatal"))},
			},
			steps: []step{
				{name: "pending", wantPending: []string{"a"}},
				{name: "value changed", advance: time.Second, do: func(e *testEnv) {
					old, _, _ := e.rules.GetByKey(ruleName)
					updated := old.(*resourcev1.DeviceTaintRule).DeepCopy()
					updated.Spec.Taint.Value = "harmless"
					updated.Generation++
					_ = e.rules.Update(updated)
					e.c.onRule(klog.FromContext(e.ctx), old, updated)
				}, wantCancelled: 1},
				{name: "status after the interval", advance: DefaultStatusUpdateInterval, wantCancelled: 1,
					wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 0 pods evicted, 1 evictions cancelled")},
			},
		},
		"NoSchedule evicts nothing, pods counted": {
			objects: testObjects{
				pods: []*corev1.Pod{pod("a"), pod("b"), pod("c")},
				claims: []*resourcev1.ResourceClaim{
					claim("shared", gpu0, consumer("a"), consumer("b")),
					claim("other-device", []string{"gpu-1"}, consumer("c")),
				},
				rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", taintWithEffect("example.com/broken", resourcev1.DeviceTaintEffectNoSchedule))},
			},
			steps: []step{{name: "nothing evicted", advance: time.Hour,
				wantCondition: cond(metav1.ConditionFalse, ReasonNotStarted, "Eviction not started because the effect is NoSchedule: 2 pods use selected devices without tolerating the taint")}},
		},
		"None evicts nothing, tolerating pods not counted": {
			objects: testObjects{
				pods: []*corev1.Pod{pod("a"), pod("b")},
				claims: []*resourcev1.ResourceClaim{
					claim("plain", gpu0, consumer("a")),
					withTolerations(claim("tolerating", gpu0, consumer("b")), resourcev1.DeviceToleration{Operator: resourcev1.DeviceTolerationOpExists}),
				},
				rules: []*resourcev1.DeviceTaintRule{rule(ruleName, "", taintWithEffect("example.com/broken", resourcev1.DeviceTaintEffectNone))},
			},
			steps: []step{{name: "nothing evicted", advance: time.Hour,
				wantCondition: cond(metav1.ConditionFalse, ReasonNotStarted, "Eviction not started because the effect is None: 1 pods use selected devices without tolerating the taint")}},
		},
		"slice taint evicts": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a"), pod("b")},
				claims: []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a")), claim("claim-b", []string{"gpu-1"}, consumer("b"))},
				slices: []*resourcev1.ResourceSlice{slice("node-1-gpus", 1, 2, noExecute("example.com/broken"))},
			},
			steps: []step{{name: "user of the tainted device evicted", wantDeleted: []string{"a"}}},
		},
		"slice taint of an older pool generation is ignored": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a"))},
				slices: []*resourcev1.ResourceSlice{slice("old", 1, 2, noExecute("example.com/broken")), slice("new", 2, 2)},
			},
			steps: []step{{name: "nothing evicted", advance: time.Hour}},
		},
		"slice taint NoSchedule evicts nothing": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a"))},
				slices: []*resourcev1.ResourceSlice{slice("node-1-gpus", 1, 2, taintWithEffect("example.com/broken", resourcev1.DeviceTaintEffectNoSchedule))},
			},
			steps: []step{{name: "nothing evicted", advance: time.Hour}},
		},
		"slice taint tolerated, rule taint not": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{withTolerations(claim("claim-a", gpu0, consumer("a")), exists("example.com/slice", nil))},
				slices: []*resourcev1.ResourceSlice{slice("node-1-gpus", 1, 2, noExecute("example.com/slice"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/rule"))},
			},
			steps: []step{{name: "evicted by the rule", wantDeleted: []string{"a"},
				wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 1 pods evicted, 0 evictions cancelled")}},
		},
		"rule for another device": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-1", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "nothing evicted", advance: time.Hour}},
		},
		"rule without selector matches nothing": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a")},
				claims: []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a"))},
				rules:  []*resourcev1.DeviceTaintRule{noSelector},
			},
			steps: []step{{name: "nothing evicted", advance: time.Hour}},
		},
		"rule for the whole driver": {
			objects: testObjects{
				pods:   []*corev1.Pod{pod("a"), pod("b")},
				claims: []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a")), claim("claim-b", []string{"gpu-7"}, consumer("b"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "both evicted", wantDeleted: []string{"a", "b"}}},
		},
		"finished pods are left alone": {
			objects: testObjects{
				pods: []*corev1.Pod{pod("a"), func() *corev1.Pod {
					p := pod("b")
					p.Status.Phase = corev1.PodSucceeded
					return p
				}()},
				claims: []*resourcev1.ResourceClaim{claim("shared", gpu0, consumer("a"), consumer("b"))},
				rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
			},
			steps: []step{{name: "running pod evicted", wantDeleted: []string{"a"}}},
		},
		"deleted pod still in the cache is not evicted twice": {
			objects: testObjects{
				pods:       []*corev1.Pod{pod("a")},
				claims:     []*resourcev1.ResourceClaim{claim("claim-a", gpu0, consumer("a"))},
				rules:      []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
				staleCache: true,
			},
			steps: []step{
				{name: "evicted", wantDeleted: []string{"a"}},
				{name: "pod queued again", advance: DefaultStatusUpdateInterval, do: func(e *testEnv) { e.queue.Add(podKeyPrefix + testNamespace + "/a") },
					wantDeleted:   []string{"a"},
					wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 1 pods evicted, 0 evictions cancelled")},
			},
		},
		"rate limit": {
			opts:    Options{EvictionsPerSecond: 1, EvictionBurst: 2},
			objects: fivePods,
			steps: []step{
				{name: "burst", wantDeletedCount: 2, wantPending: []string{"c", "d", "e"}},
				{name: "one more after a second", advance: time.Second, wantDeletedCount: 3, wantPending: []string{"d", "e"}},
				{name: "one more after another second", advance: time.Second, wantDeletedCount: 4, wantPending: []string{"e"}},
				{name: "the last one", advance: time.Second, wantDeletedCount: 5},
			},
		},
		"rule status written at most once per interval": {
			opts:    Options{EvictionsPerSecond: 1, EvictionBurst: 1, StatusUpdateInterval: 5 * time.Second},
			objects: fivePods,
			steps: []step{
				{name: "first eviction", wantDeletedCount: 1, wantStatusWrites: 1, wantPending: []string{"b", "c", "d", "e"},
					wantCondition: cond(metav1.ConditionTrue, ReasonPodsPendingEviction, "4 pods pending eviction, 1 pods evicted, 0 evictions cancelled")},
				{name: "second", advance: time.Second, wantDeletedCount: 2, wantStatusWrites: 1, wantPending: []string{"c", "d", "e"}},
				{name: "third", advance: time.Second, wantDeletedCount: 3, wantStatusWrites: 1, wantPending: []string{"d", "e"}},
				{name: "fourth", advance: time.Second, wantDeletedCount: 4, wantStatusWrites: 1, wantPending: []string{"e"}},
				{name: "fifth", advance: time.Second, wantDeletedCount: 5, wantStatusWrites: 1},
				{name: "interval over", advance: time.Second, wantDeletedCount: 5, wantStatusWrites: 2,
					wantCondition: cond(metav1.ConditionFalse, ReasonCompleted, "0 pods pending eviction, 5 pods evicted, 0 evictions cancelled")},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.groupClaims {
				featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{features.GenericWorkload: true, features.DRAWorkloadResourceClaims: true})
			}
			e := newTestEnv(t, tc.opts, tc.objects)
			for _, step := range tc.steps {
				if step.advance > 0 {
					e.clock.Step(step.advance)
					e.queue.releaseDue()
				}
				if step.do != nil {
					step.do(e)
				}
				e.drain()

				deleted := e.deletedPods()
				if step.wantDeletedCount > 0 {
					if len(deleted) != step.wantDeletedCount {
						t.Errorf("%s: deleted %d pods %v, want %d", step.name, len(deleted), deleted, step.wantDeletedCount)
					}
				} else {
					slices.Sort(deleted)
					if !slices.Equal(deleted, step.wantDeleted) {
						t.Errorf("%s: deleted pods %v, want %v", step.name, deleted, step.wantDeleted)
					}
				}
				if pending := e.pendingPods(); !slices.Equal(pending, step.wantPending) {
					t.Errorf("%s: pending evictions %v, want %v", step.name, pending, step.wantPending)
				}
				if cancelled := e.eventsWithReason(ReasonEvictionCancelled); len(cancelled) != step.wantCancelled {
					t.Errorf("%s: cancellation events %q, want %d", step.name, cancelled, step.wantCancelled)
				}
				if step.wantCondition != nil {
					got := e.ruleCondition(ruleName)
					if got == nil {
						t.Errorf("%s: rule has no condition, want %+v", step.name, step.wantCondition)
					} else if got.Status != step.wantCondition.Status || got.Reason != step.wantCondition.Reason || got.Message != step.wantCondition.Message {
						t.Errorf("%s: rule condition %s/%s %q, want %s/%s %q", step.name,
							got.Status, got.Reason, got.Message, step.wantCondition.Status, step.wantCondition.Reason, step.wantCondition.Message)
					}
				}
				if step.wantStatusWrites > 0 {
					if writes := e.statusWrites(); writes != step.wantStatusWrites {
						t.Errorf("%s: %d rule status writes, want %d", step.name, writes, step.wantStatusWrites)
					}
				}
			}
		})
	}
}

func (e *testEnv) statusWrites() int {
	writes := 0
	for _, action := range e.resource.Actions() {
		if action.GetResource().Resource == "devicetaintrules" && action.GetSubresource() == "status" && action.GetVerb() == "patch" {
			writes++
		}
	}
	return writes
}

// TestEvictionWrites checks what one eviction sends: the DisruptionTarget
// condition first, then a delete of exactly that pod instance, plus the
// events on pod and rule.
func TestEvictionWrites(t *testing.T) {
	setupMetrics()
	evictedBefore, err := testutil.GetCounterMetricValue(podsEvicted.WithLabelValues("rule"))
	if err != nil {
		t.Fatalf("read pods evicted metric: %v", err)
	}
	latencyCountBefore, err := testutil.GetHistogramMetricCount(evictionLatency.ObserverMetric)
	if err != nil {
		t.Fatalf("read eviction latency metric: %v", err)
	}

	e := newTestEnv(t, Options{}, testObjects{
		pods:   []*corev1.Pod{pod("a")},
		claims: []*resourcev1.ResourceClaim{claim("claim-a", []string{"gpu-0"}, consumer("a"))},
		rules:  []*resourcev1.DeviceTaintRule{rule(ruleName, "gpu-0", noExecute("example.com/broken"))},
	})
	e.drain()

	var writes []string
	for _, action := range e.kube.Actions() {
		if action.GetResource().Resource != "pods" {
			continue
		}
		switch action := action.(type) {
		case k8stesting.PatchAction:
			writes = append(writes, action.GetVerb()+" "+action.GetSubresource())
			if !strings.Contains(string(action.GetPatch()), `"DisruptionTarget"`) || !strings.Contains(string(action.GetPatch()), PodConditionReason) {
				t.Errorf("status patch does not set the condition: %s", action.GetPatch())
			}
		case k8stesting.DeleteAction:
			writes = append(writes, action.GetVerb())
			if uid := action.GetDeleteOptions().Preconditions; uid == nil || uid.UID == nil || *uid.UID != types.UID("a-uid") {
				t.Errorf("delete without uid precondition: %+v", action.GetDeleteOptions())
			}
		}
	}
	if want := []string{"patch status", "delete"}; !slices.Equal(writes, want) {
		t.Errorf("pod writes %q, want %q", writes, want)
	}

	wantEvents := map[string]string{
		ReasonEvicting:       "device gpu.example.com/node-1/gpu-0 has taint example.com/broken:NoExecute from DeviceTaintRule maintenance",
		ReasonRulePodEvicted: "Evicted pod default/a",
	}
	if evicted, _ := testutil.GetCounterMetricValue(podsEvicted.WithLabelValues("rule")); evicted-evictedBefore != 1 {
		t.Errorf("pods evicted metric grew by %v, want 1", evicted-evictedBefore)
	}
	if count, _ := testutil.GetHistogramMetricCount(evictionLatency.ObserverMetric); count-latencyCountBefore != 1 {
		t.Errorf("eviction latency metric got %d samples, want 1", count-latencyCountBefore)
	}

	for reason, want := range wantEvents {
		events := e.eventsWithReason(reason)
		if len(events) != 1 || !strings.Contains(events[0], want) {
			t.Errorf("events with reason %s: %q, want one containing %q", reason, events, want)
		}
	}
}

func TestEvictionTimeFor(t *testing.T) {
	taint := appliedTaint{taint: noExecute("example.com/broken"), since: t0}
	taintWithValue := taint
	taintWithValue.taint.Value = "v1"
	tests := map[string]struct {
		taint       appliedTaint
		tolerations []resourcev1.DeviceToleration
		wantAfter   time.Duration
		wantNever   bool
	}{
		"no toleration":                {taint: taint},
		"NoSchedule never evicts":      {taint: appliedTaint{taint: taintWithEffect("k", resourcev1.DeviceTaintEffectNoSchedule), since: t0}, wantNever: true},
		"None never evicts":            {taint: appliedTaint{taint: taintWithEffect("k", resourcev1.DeviceTaintEffectNone), since: t0}, wantNever: true},
		"exists forever":               {taint: taint, tolerations: []resourcev1.DeviceToleration{exists("example.com/broken", nil)}, wantNever: true},
		"exists any key":               {taint: taint, tolerations: []resourcev1.DeviceToleration{{Operator: resourcev1.DeviceTolerationOpExists}}, wantNever: true},
		"exists other key":             {taint: taint, tolerations: []resourcev1.DeviceToleration{exists("example.com/other", nil)}},
		"equal with value":             {taint: taintWithValue, tolerations: []resourcev1.DeviceToleration{{Key: "example.com/broken", Value: "v1"}}, wantNever: true},
		"equal with other value":       {taint: taintWithValue, tolerations: []resourcev1.DeviceToleration{{Key: "example.com/broken", Value: "v2"}}},
		"equal operator explicit":      {taint: taintWithValue, tolerations: []resourcev1.DeviceToleration{{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpEqual, Value: "v1"}}, wantNever: true},
		"unknown operator":             {taint: taint, tolerations: []resourcev1.DeviceToleration{{Key: "example.com/broken", Operator: "Like"}}},
		"other effect":                 {taint: taint, tolerations: []resourcev1.DeviceToleration{{Key: "example.com/broken", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}},
		"seconds":                      {taint: taint, tolerations: []resourcev1.DeviceToleration{exists("example.com/broken", ptr.To[int64](30))}, wantAfter: 30 * time.Second},
		"smallest seconds":             {taint: taint, tolerations: []resourcev1.DeviceToleration{exists("example.com/broken", ptr.To[int64](30)), exists("", ptr.To[int64](7))}, wantAfter: 7 * time.Second},
		"negative seconds: at once":    {taint: taint, tolerations: []resourcev1.DeviceToleration{exists("example.com/broken", ptr.To[int64](-5))}},
		"seconds and forever: forever": {taint: taint, tolerations: []resourcev1.DeviceToleration{exists("example.com/broken", ptr.To[int64](1)), exists("example.com/broken", nil)}, wantNever: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at, evicts := evictionTimeFor(tc.taint, tc.tolerations)
			if evicts == tc.wantNever {
				t.Fatalf("evicts %v, want %v", evicts, !tc.wantNever)
			}
			if evicts && !at.Equal(t0.Add(tc.wantAfter)) {
				t.Errorf("eviction at %s, want %s", at.Sub(t0), tc.wantAfter)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	tests := map[string]struct {
		opts    Options
		want    Options
		wantErr bool
	}{
		"defaults":       {want: Options{EvictionsPerSecond: DefaultEvictionsPerSecond, EvictionBurst: DefaultEvictionsPerSecond, StatusUpdateInterval: DefaultStatusUpdateInterval}},
		"burst from qps": {opts: Options{EvictionsPerSecond: 0.5}, want: Options{EvictionsPerSecond: 0.5, EvictionBurst: 1, StatusUpdateInterval: DefaultStatusUpdateInterval}},
		"negative":       {opts: Options{EvictionsPerSecond: -1}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.opts.withDefaults()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
