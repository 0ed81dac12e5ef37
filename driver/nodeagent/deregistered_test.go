package nodeagent

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
)

// TestSliceRemover: a driver gone for longer than the grace period loses
// the node's slices; one back within it keeps them; the period counts
// from the last time the driver went; other drivers' slices stay.
func TestSliceRemover(t *testing.T) {
	const grace = 30 * time.Second
	type step struct {
		gone, back string        // driver that goes or comes back
		wait       time.Duration // then the clock moves on
	}
	tests := []struct {
		name  string
		steps []step
		want  []string // slices left
	}{
		{
			name:  "gone longer than the period",
			steps: []step{{gone: "a.example.com", wait: grace + time.Second}},
			want:  []string{"b-slice"},
		},
		{
			name:  "gone, not yet for the period",
			steps: []step{{gone: "a.example.com", wait: grace - time.Second}},
			want:  []string{"a-slice", "b-slice"},
		},
		{
			name:  "back within the period",
			steps: []step{{gone: "a.example.com", wait: grace - time.Second}, {back: "a.example.com", wait: time.Hour}},
			want:  []string{"a-slice", "b-slice"},
		},
		{
			name: "gone again: the period starts over",
			steps: []step{{gone: "a.example.com", wait: 20 * time.Second}, {back: "a.example.com"},
				{gone: "a.example.com", wait: 20 * time.Second}},
			want: []string{"a-slice", "b-slice"},
		},
		{
			name: "gone twice without coming back: the period counts from the first",
			steps: []step{{gone: "a.example.com", wait: 20 * time.Second},
				{gone: "a.example.com", wait: 11 * time.Second}},
			want: []string{"b-slice"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			mk := func(name, driver string) *resourcev1.ResourceSlice {
				return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
					Driver: driver, NodeName: ptr.To("node-a"), Pool: resourcev1.ResourcePool{Name: "node-a", Generation: 1, ResourceSliceCount: 1}}}
			}
			client := resourcefake.NewSimpleClientset(mk("a-slice", "a.example.com"), mk("b-slice", "b.example.com"))
			clk := testingclock.NewFakeClock(time.Now())
			r := NewSliceRemover(client, "node-a", grace, clk)
			for _, s := range tc.steps {
				if s.gone != "" {
					r.Gone(ctx, s.gone)
				}
				if s.back != "" {
					r.Back(s.back)
				}
				clk.Step(s.wait)
			}
			// Removals run in the timers' goroutines: wait for those
			// that fired, then call off the others. Give a removal that
			// should not have happened the time to show.
			time.Sleep(100 * time.Millisecond)
			deadline := time.Now().Add(10 * time.Second)
			var got []string
			for {
				list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got = got[:0]
				for _, s := range list.Items {
					got = append(got, s.Name)
				}
				slices.Sort(got)
				if slices.Equal(got, tc.want) || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			r.Wait()
			if !slices.Equal(got, tc.want) {
				t.Errorf("slices left %v, want %v", got, tc.want)
			}
		})
	}
}
