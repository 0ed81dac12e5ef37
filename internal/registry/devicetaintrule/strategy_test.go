package devicetaintrule

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/testing/apitest"
)

var (
	earlier = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	now     = metav1.NewTime(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
)

// testStrategy stamps the fixed time now.
func testStrategy() ruleStrategy {
	s := NewStrategy(apitest.Scheme())
	s.now = func() metav1.Time { return now }
	return s
}

func testRule(mutate ...func(*resourceapi.DeviceTaintRule)) *resourceapi.DeviceTaintRule {
	rule := &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule", ResourceVersion: "1", Generation: 1},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To("gpu.example.com")},
			Taint:          resourceapi.DeviceTaint{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: &earlier},
		},
	}
	for _, m := range mutate {
		m(rule)
	}
	return rule
}

func withCondition(rule *resourceapi.DeviceTaintRule) {
	rule.Status.Conditions = []metav1.Condition{{Type: "EvictionInProgress", Status: metav1.ConditionTrue, Reason: "Evicting", LastTransitionTime: earlier}}
}

func TestPrepareForCreate(t *testing.T) {
	tests := map[string]struct {
		rule          *resourceapi.DeviceTaintRule
		wantTimeAdded metav1.Time
	}{
		"time stamped when missing": {
			rule:          testRule(func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.TimeAdded = nil }),
			wantTimeAdded: now,
		},
		"explicit time kept": {rule: testRule(), wantTimeAdded: earlier},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			withCondition(tc.rule)
			tc.rule.Generation = 4
			testStrategy().PrepareForCreate(context.Background(), tc.rule)
			if !tc.rule.Spec.Taint.TimeAdded.Equal(&tc.wantTimeAdded) {
				t.Errorf("timeAdded %v, want %v", tc.rule.Spec.Taint.TimeAdded, tc.wantTimeAdded)
			}
			if tc.rule.Generation != 1 {
				t.Errorf("generation %d, want 1", tc.rule.Generation)
			}
			if len(tc.rule.Status.Conditions) != 0 {
				t.Errorf("create kept the status: %+v", tc.rule.Status)
			}
		})
	}
}

func TestPrepareForUpdate(t *testing.T) {
	tests := map[string]struct {
		old, new       *resourceapi.DeviceTaintRule
		wantTimeAdded  metav1.Time
		wantGeneration int64
	}{
		"label change": {
			old:            testRule(),
			new:            testRule(func(r *resourceapi.DeviceTaintRule) { r.Labels = map[string]string{"a": "b"} }),
			wantTimeAdded:  earlier,
			wantGeneration: 1,
		},
		"effect change re-stamps and bumps the generation": {
			old:            testRule(),
			new:            testRule(func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = resourceapi.DeviceTaintEffectNoExecute }),
			wantTimeAdded:  now,
			wantGeneration: 2,
		},
		"selector change keeps the time": {
			old:            testRule(),
			new:            testRule(func(r *resourceapi.DeviceTaintRule) { r.Spec.DeviceSelector.Pool = ptr.To("pool") }),
			wantTimeAdded:  earlier,
			wantGeneration: 2,
		},
		"missing time keeps the stored one": {
			old:            testRule(),
			new:            testRule(func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.TimeAdded = nil }),
			wantTimeAdded:  earlier,
			wantGeneration: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			withCondition(tc.old)
			testStrategy().PrepareForUpdate(context.Background(), tc.new, tc.old)
			if !tc.new.Spec.Taint.TimeAdded.Equal(&tc.wantTimeAdded) {
				t.Errorf("timeAdded %v, want %v", tc.new.Spec.Taint.TimeAdded, tc.wantTimeAdded)
			}
			if tc.new.Generation != tc.wantGeneration {
				t.Errorf("generation %d, want %d", tc.new.Generation, tc.wantGeneration)
			}
			if diff := cmp.Diff(tc.old.Status, tc.new.Status); diff != "" {
				t.Errorf("an update of the main resource changed the status (-old +new):\n%s", diff)
			}
		})
	}
}

func TestStatusUpdateKeepsSpecAndMetadata(t *testing.T) {
	old := testRule()
	new := testRule(withCondition, func(r *resourceapi.DeviceTaintRule) {
		r.Spec.Taint.Key = "example.com/other"
		r.Labels = map[string]string{"a": "b"}
	})
	NewStatusStrategy(apitest.Scheme()).PrepareForUpdate(context.Background(), new, old)
	if diff := cmp.Diff(old.Spec, new.Spec); diff != "" {
		t.Errorf("spec changed through status (-old +new):\n%s", diff)
	}
	if new.Labels != nil {
		t.Errorf("labels changed through status: %v", new.Labels)
	}
	if len(new.Status.Conditions) != 1 {
		t.Errorf("status not written: %+v", new.Status)
	}
}

func TestSelectorString(t *testing.T) {
	tests := map[string]struct {
		selector *resourceapi.DeviceTaintSelector
		want     string
	}{
		"none":        {nil, "*/*/*"},
		"driver only": {&resourceapi.DeviceTaintSelector{Driver: ptr.To("d")}, "d/*/*"},
		"all":         {&resourceapi.DeviceTaintSelector{Driver: ptr.To("d"), Pool: ptr.To("p"), Device: ptr.To("x")}, "d/p/x"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := selectorString(tc.selector); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
