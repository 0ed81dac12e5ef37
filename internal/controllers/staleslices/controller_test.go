package staleslices

import (
	"context"
	"maps"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

func node(name string, uid types.UID) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
}

func slice(name, nodeName string, owner *corev1.Node) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com",
			Pool: resourcev1.ResourcePool{Name: "pool", Generation: 1, ResourceSliceCount: 1}},
	}
	if nodeName != "" {
		s.Spec.NodeName = ptr.To(nodeName)
	} else {
		s.Spec.AllNodes = ptr.To(true)
	}
	if owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner.Name, UID: owner.UID}}
	}
	return s
}

func TestSync(t *testing.T) {
	nodeA, nodeAOld := node("node-a", "uid-a"), node("node-a", "uid-a-old")
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		slices      []*resourcev1.ResourceSlice
		key         string
		wantRemains []string
	}{
		{name: "owner exists: kept", nodes: []*corev1.Node{nodeA},
			slices: []*resourcev1.ResourceSlice{slice("s", "node-a", nodeA)}, key: "slice/s", wantRemains: []string{"s"}},
		{name: "owner gone: removed",
			slices: []*resourcev1.ResourceSlice{slice("s", "node-a", nodeA)}, key: "slice/s"},
		{name: "node registered again under the same name: the old node's slice removed", nodes: []*corev1.Node{nodeA},
			slices: []*resourcev1.ResourceSlice{slice("s", "node-a", nodeAOld)}, key: "slice/s"},
		{name: "network-attached slice owned by a gone node: removed",
			slices: []*resourcev1.ResourceSlice{slice("s", "", nodeA)}, key: "slice/s"},
		{name: "no owner, node never existed: kept",
			slices: []*resourcev1.ResourceSlice{slice("s", "node-a", nil)}, key: "slice/s", wantRemains: []string{"s"}},
		{name: "node deleted: its slices go, other nodes' and network-attached stay",
			nodes: []*corev1.Node{node("node-b", "uid-b")},
			slices: []*resourcev1.ResourceSlice{slice("a1", "node-a", nil), slice("a2", "node-a", nil),
				slice("b", "node-b", nil), slice("net", "", nil)},
			key: "node/node-a", wantRemains: []string{"b", "net"}},
		{name: "node deleted and registered again: unowned slices kept", nodes: []*corev1.Node{nodeA},
			slices: []*resourcev1.ResourceSlice{slice("a1", "node-a", nil)}, key: "node/node-a", wantRemains: []string{"a1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var kubeObjects, resourceObjects []runtime.Object
			for _, n := range tc.nodes {
				kubeObjects = append(kubeObjects, n)
			}
			for _, s := range tc.slices {
				resourceObjects = append(resourceObjects, s)
			}
			kubeClient := fake.NewClientset(kubeObjects...)
			resourceClient := resourcefake.NewSimpleClientset(resourceObjects...)
			kubeFactory := informers.NewSharedInformerFactory(kubeClient, 0)
			resourceFactory := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
			nodes, slices := kubeFactory.Core().V1().Nodes(), resourceFactory.Resource().V1().ResourceSlices()
			c, err := NewController(klog.FromContext(ctx), kubeClient, resourceClient, nodes, slices)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.nodes {
				_ = nodes.Informer().GetIndexer().Add(n)
			}
			for _, s := range tc.slices {
				_ = slices.Informer().GetIndexer().Add(s)
			}
			if err := c.sync(ctx, tc.key); err != nil {
				t.Fatal(err)
			}
			// Follow-up keys (a node's owned slices) are handled too.
			for c.queue.Len() > 0 {
				key, _ := c.queue.Get()
				if err := c.sync(ctx, key); err != nil {
					t.Fatal(err)
				}
				c.queue.Done(key)
			}
			list, err := resourceClient.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var remains []string
			for _, s := range list.Items {
				remains = append(remains, s.Name)
			}
			sort.Strings(remains)
			if len(remains) != len(tc.wantRemains) || (len(remains) > 0 && !equal(remains, tc.wantRemains)) {
				t.Errorf("slices left: %v, want %v", remains, tc.wantRemains)
			}
		})
	}
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSweepAtStart: the controller starts after a node was deleted while
// it was down. The node's unowned slices that it had seen with the node go;
// unowned slices of a node never seen stay (published before the node
// registers); those of a node that exists get the node's UID noted.
func TestSweepAtStart(t *testing.T) {
	seen := func(s *resourcev1.ResourceSlice, uid types.UID) *resourcev1.ResourceSlice {
		s.Annotations = map[string]string{NodeUIDAnnotation: string(uid)}
		return s
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kubeClient := fake.NewClientset(node("node-b", "uid-b"))
	resourceClient := resourcefake.NewSimpleClientset(
		seen(slice("a1", "node-a", nil), "uid-a"),
		slice("early", "node-c", nil),
		slice("b", "node-b", nil),
		seen(slice("b-old", "node-b", nil), "uid-b-old"),
	)
	kubeFactory := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceFactory := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	c, err := NewController(klog.FromContext(ctx), kubeClient, resourceClient, kubeFactory.Core().V1().Nodes(), resourceFactory.Resource().V1().ResourceSlices())
	if err != nil {
		t.Fatal(err)
	}
	kubeFactory.Start(ctx.Done())
	resourceFactory.Start(ctx.Done())
	go c.Run(ctx, 1)

	expect := func(want map[string]string) { // slice -> noted node UID
		t.Helper()
		var got map[string]string
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := resourceClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			got = map[string]string{}
			for _, s := range list.Items {
				got[s.Name] = s.Annotations[NodeUIDAnnotation]
			}
			return maps.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("slices (name: noted node UID) %v, want %v", got, want)
		}
	}
	expect(map[string]string{"early": "", "b": "uid-b", "b-old": "uid-b"})

	// The node of the early slice registers: its UID is noted.
	if _, err := kubeClient.CoreV1().Nodes().Create(ctx, node("node-c", "uid-c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(map[string]string{"early": "uid-c", "b": "uid-b", "b-old": "uid-b"})
}
