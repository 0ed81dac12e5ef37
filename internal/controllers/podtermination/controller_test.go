package podtermination

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

func TestSync(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	pod := func(deletion *metav1.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("uid-1"), DeletionTimestamp: deletion},
			Spec: corev1.PodSpec{NodeName: "node-1"}}
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		wantDeleted bool
		wantRequeue time.Duration
	}{
		{name: "not terminating: left alone", pod: pod(nil)},
		// deletionTimestamp is stored in whole seconds, the fraction cut
		// off: the grace period ends up to a second after it.
		{name: "grace period running: look again a second after the timestamp", pod: pod(at(20 * time.Second)), wantRequeue: 21 * time.Second},
		{name: "timestamp reached: the cut-off fraction may still run", pod: pod(at(0)), wantRequeue: time.Second},
		{name: "timestamp passed less than a second ago: not yet", pod: pod(at(-600 * time.Millisecond)), wantRequeue: 400 * time.Millisecond},
		{name: "a second past the timestamp: removed", pod: pod(at(-time.Second)), wantDeleted: true},
		{name: "grace period long over: removed", pod: pod(at(-time.Minute)), wantDeleted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset(tc.pod)
			factory := informers.NewSharedInformerFactory(client, 0)
			c, err := NewController(klog.FromContext(ctx), client, factory.Core().V1().Pods())
			if err != nil {
				t.Fatal(err)
			}
			c.clock = testingclock.NewFakeClock(now)
			if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(tc.pod); err != nil {
				t.Fatal(err)
			}
			requeue, err := c.sync(ctx, "ns/p")
			if err != nil {
				t.Fatal(err)
			}
			if requeue != tc.wantRequeue {
				t.Errorf("requeue after %v, want %v", requeue, tc.wantRequeue)
			}
			_, err = client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if deleted := err != nil; deleted != tc.wantDeleted {
				t.Errorf("deleted=%v, want %v (get error: %v)", deleted, tc.wantDeleted, err)
			}
			if tc.wantDeleted {
				var deletes int
				for _, action := range client.Actions() {
					del, ok := action.(k8stesting.DeleteActionImpl)
					if !ok {
						continue
					}
					deletes++
					opts := del.GetDeleteOptions()
					if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
						t.Errorf("delete without a zero grace period: %+v", opts)
					}
					if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != tc.pod.UID {
						t.Errorf("delete without the pod's uid as precondition: %+v", opts)
					}
				}
				if deletes != 1 {
					t.Errorf("%d delete calls, want 1", deletes)
				}
			}
		})
	}
}

func TestOnlyTerminatingPodsQueued(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(klog.FromContext(ctx), client, factory.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	c.enqueue(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "ns"}})
	c.enqueue(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "deleted", Namespace: "ns", DeletionTimestamp: &metav1.Time{}}})
	if got := c.queue.Len(); got != 1 {
		t.Fatalf("queue length %d, want 1", got)
	}
	key, _ := c.queue.Get()
	if key != "ns/deleted" {
		t.Errorf("queued %q, want ns/deleted", key)
	}
}
