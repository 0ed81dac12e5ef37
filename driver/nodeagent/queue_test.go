package nodeagent

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// newTestAgent is an agent with fake clients and unstarted informers.
func newTestAgent(t *testing.T, opts Options) *Agent {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	resourceFactory := resourceinformers.NewSharedInformerFactory(resourcefake.NewSimpleClientset(), 0)
	if opts.Drivers == nil {
		opts.Drivers = DriverMap{}
	}
	a, err := New(logger, kube, factory.Core().V1().Pods(), ClaimsFromLister{resourceFactory.Resource().V1().ResourceClaims().Lister()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEnqueuePod: only pods on the agent's nodes with a step ahead are queued.
func TestEnqueuePod(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "pending on its node", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "sim-node-1"}}, want: true},
		{name: "other node", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "node-1"}}},
		{name: "not one of its nodes", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "sim-node-2"}}},
		{name: "succeeded", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "sim-node-0"},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestAgent(t, Options{Nodes: []string{"sim-node-0", "sim-node-1"}})
			s.enqueuePod(tc.pod)
			if got := s.queue.Len() == 1; got != tc.want {
				t.Errorf("queued=%v, want %v", got, tc.want)
			}
		})
	}
}

// TestEnqueueConsumers: a claim event queues the pods it is reserved for.
func TestEnqueueConsumers(t *testing.T) {
	tests := []struct {
		name  string
		claim *resourcev1.ResourceClaim
		want  []string
	}{
		{name: "not allocated", claim: &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}},
		{name: "shared, reserved for two pods", claim: &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}, ReservedFor: []resourcev1.ResourceClaimConsumerReference{
				{Resource: "pods", Name: "a", UID: "1"}, {Resource: "pods", Name: "b", UID: "2"}, {APIGroup: "example.com", Resource: "jobs", Name: "j", UID: "3"},
			}}}, want: []string{"ns/a", "ns/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestAgent(t, Options{Nodes: []string{"sim-node-0"}})
			s.EnqueueConsumers(tc.claim)
			var got []string
			for s.queue.Len() > 0 {
				key, _ := s.queue.Get()
				got = append(got, key)
				s.queue.Done(key)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}
