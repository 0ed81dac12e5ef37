package podgc

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node}}
}

func TestSync(t *testing.T) {
	terminating := pod("terminating", "node-a")
	terminating.DeletionTimestamp = &metav1.Time{}
	pods := []*corev1.Pod{pod("a1", "node-a"), pod("a2", "node-a"), terminating, pod("b", "node-b"), pod("unbound", "")}
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		key         string
		wantRemains []string
	}{
		{name: "node deleted: its pods go, others stay", nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}},
			key: "node-a", wantRemains: []string{"b", "unbound"}},
		{name: "node registered again: its pods stay", nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}},
			key: "node-a", wantRemains: []string{"a1", "a2", "b", "terminating", "unbound"}},
		{name: "node without pods deleted: nothing happens",
			key: "node-c", wantRemains: []string{"a1", "a2", "b", "terminating", "unbound"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var objects []runtime.Object
			for _, n := range tc.nodes {
				objects = append(objects, n)
			}
			for _, p := range pods {
				objects = append(objects, p)
			}
			client := fake.NewClientset(objects...)
			factory := informers.NewSharedInformerFactory(client, 0)
			c, err := NewController(klog.FromContext(ctx), client, factory.Core().V1().Pods(), factory.Core().V1().Nodes())
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.nodes {
				_ = factory.Core().V1().Nodes().Informer().GetIndexer().Add(n)
			}
			for _, p := range pods {
				_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(p)
			}
			if err := c.sync(ctx, tc.key); err != nil {
				t.Fatal(err)
			}
			list, err := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var remains []string
			for _, p := range list.Items {
				remains = append(remains, p.Name)
			}
			slices.Sort(remains)
			if !slices.Equal(remains, tc.wantRemains) {
				t.Errorf("pods left: %v, want %v", remains, tc.wantRemains)
			}
			for _, action := range client.Actions() {
				del, ok := action.(k8stesting.DeleteActionImpl)
				if !ok {
					continue
				}
				opts := del.GetDeleteOptions()
				if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
					t.Errorf("delete of %s without a zero grace period: %+v", del.GetName(), opts)
				}
				if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != types.UID("uid-"+del.GetName()) {
					t.Errorf("delete of %s without the pod's uid as precondition: %+v", del.GetName(), opts)
				}
			}
		})
	}
}

func TestDeletedNodeQueued(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(klog.FromContext(ctx), client, factory.Core().V1().Pods(), factory.Core().V1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	c.enqueueDeletedNode(cache.DeletedFinalStateUnknown{Key: "node-a", Obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}})
	if got := c.queue.Len(); got != 1 {
		t.Fatalf("queue length %d, want 1", got)
	}
	if key, _ := c.queue.Get(); key != "node-a" {
		t.Errorf("queued %q, want node-a", key)
	}
}
