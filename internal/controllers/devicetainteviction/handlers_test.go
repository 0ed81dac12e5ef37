package devicetainteviction

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestHandlers checks what the event handlers queue, from the caches
// alone.
func TestHandlers(t *testing.T) {
	gpu0 := []string{"gpu-0"}
	shared := claim("shared", gpu0, consumer("a"), consumer("b"))
	grown := claim("shared", gpu0, consumer("a"), consumer("b"), consumer("c"))
	unallocated := claim("shared", nil)
	unallocated.Status = resourcev1.ResourceClaimStatus{}
	maintenance := rule(ruleName, "gpu-0", noExecute("example.com/broken"))
	withStatus := maintenance.DeepCopy()
	withStatus.Status.Conditions = []metav1.Condition{{Type: "EvictionInProgress", Status: metav1.ConditionFalse, Reason: ReasonCompleted}}
	widened := maintenance.DeepCopy()
	widened.Spec.DeviceSelector.Device = nil
	plain := slice("s", 1, 2)
	tainted := slice("s", 1, 2, noExecute("example.com/broken"))
	nextGeneration := slice("s", 2, 2)

	tests := map[string]struct {
		// pending pods, by name.
		pending []string
		event   func(c *Controller, logger klog.Logger)
		want    []string
	}{
		"pod with a reserved claim": {
			event: func(c *Controller, logger klog.Logger) { c.onPod(logger, pod("a"), false) },
			want:  []string{"pod:default/a"},
		},
		"pod without claims": {
			event: func(c *Controller, logger klog.Logger) { c.onPod(logger, pod("x"), false) },
		},
		"deleted pod without pending eviction": {
			event: func(c *Controller, logger klog.Logger) { c.onPod(logger, pod("a"), true) },
		},
		"deleted pod with pending eviction, as tombstone": {
			pending: []string{"x"},
			event: func(c *Controller, logger klog.Logger) {
				c.onPod(logger, cache.DeletedFinalStateUnknown{Key: "default/x", Obj: pod("x")}, true)
			},
			want: []string{"pod:default/x"},
		},
		"claim status unchanged": {
			event: func(c *Controller, logger klog.Logger) { c.onClaim(logger, shared, shared.DeepCopy()) },
		},
		"claim gets a consumer": {
			event: func(c *Controller, logger klog.Logger) { c.onClaim(logger, shared, grown) },
			want:  []string{"pod:default/a", "pod:default/b", "pod:default/c", allRulesKey},
		},
		"claim deallocated": {
			event: func(c *Controller, logger klog.Logger) { c.onClaim(logger, shared, unallocated) },
			want:  []string{"pod:default/a", "pod:default/b", allRulesKey},
		},
		"claim deleted, as tombstone": {
			event: func(c *Controller, logger klog.Logger) {
				c.onClaim(logger, cache.DeletedFinalStateUnknown{Key: "default/shared", Obj: shared}, nil)
			},
			want: []string{"pod:default/a", "pod:default/b", allRulesKey},
		},
		"unallocated claim created": {
			event: func(c *Controller, logger klog.Logger) { c.onClaim(logger, nil, unallocated) },
		},
		"slice update without taints": {
			event: func(c *Controller, logger klog.Logger) { c.onSlice(logger, plain, plain.DeepCopy()) },
		},
		"slice taint added": {
			event: func(c *Controller, logger klog.Logger) { c.onSlice(logger, plain, tainted) },
			want:  []string{"pod:default/a", "pod:default/b"},
		},
		"new pool generation": {
			event: func(c *Controller, logger klog.Logger) { c.onSlice(logger, nil, nextGeneration) },
			want:  []string{"pod:default/a", "pod:default/b"},
		},
		"rule created": {
			event: func(c *Controller, logger klog.Logger) { c.onRule(logger, nil, maintenance) },
			want:  []string{"rulepods:" + ruleName},
		},
		"rule status only": {
			event: func(c *Controller, logger klog.Logger) { c.onRule(logger, maintenance, withStatus) },
		},
		"rule selector changed": {
			event: func(c *Controller, logger klog.Logger) { c.onRule(logger, maintenance, widened) },
			want:  []string{"rulepods:" + ruleName},
		},
		"rule deleted, as tombstone": {
			event: func(c *Controller, logger klog.Logger) {
				c.onRule(logger, cache.DeletedFinalStateUnknown{Key: ruleName, Obj: maintenance}, nil)
			},
			want: []string{"rulepods:" + ruleName},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, Options{}, testObjects{})
			e.add(e.claims, shared)
			for _, name := range tc.pending {
				e.c.pending[testNamespace+"/"+name] = &pendingEviction{podUID: pod(name).UID, decision: &evictionDecision{}}
			}
			tc.event(e.c, klog.FromContext(e.ctx))
			if got := e.queue.ready; !slices.Equal(got, tc.want) {
				t.Errorf("queued %q, want %q", got, tc.want)
			}
		})
	}
}
