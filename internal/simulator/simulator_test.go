package simulator

import (
	"context"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	dra "github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/driver/nodeagent"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

const driver = "gpu.sim.draplane.dev"

// harness is a simulator with fake clients and unstarted informers.
type harness struct {
	sim      *Simulator
	kube     *fake.Clientset
	resource *resourcefake.Clientset
	pods     cache.Indexer
	claims   claimStore
	ctx      context.Context
	// start starts the informers.
	start func(ctx context.Context)
}

// claimStore holds a test's claims where the simulator reads them: its
// informer's cache (the binding conditions) and the API, where the
// simulated nodes get them by name.
type claimStore struct {
	indexer  cache.Indexer
	resource *resourcefake.Clientset
}

func (c claimStore) Add(claim *resourcev1.ResourceClaim) error {
	if err := c.indexer.Add(claim); err != nil {
		return err
	}
	err := c.resource.Tracker().Add(claim)
	if apierrors.IsAlreadyExists(err) {
		// Given to the fake API already.
		return nil
	}
	return err
}

func newSimulator(t *testing.T, opts Options, kubeObjects []runtime.Object, resourceObjects []runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	kube := fake.NewClientset(kubeObjects...)
	resource := resourcefake.NewSimpleClientset(resourceObjects...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	resourceFactory := resourceinformers.NewSharedInformerFactory(resource, 0)
	claimInformer := resourceFactory.Resource().V1().ResourceClaims()
	s, err := New(klog.FromContext(ctx), kube, resource, factory.Core().V1().Pods(), claimInformer, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{sim: s, kube: kube, resource: resource, ctx: ctx,
		pods: factory.Core().V1().Pods().Informer().GetIndexer(), claims: claimStore{claimInformer.Informer().GetIndexer(), resource},
		start: func(ctx context.Context) { factory.Start(ctx.Done()); resourceFactory.Start(ctx.Done()) }}
}

// run starts the informers and the simulator, which stop when the test
// ends, and returns their context.
func (h *harness) run(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(h.ctx)
	h.start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.sim.Run(ctx, 1)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ctx
}

func slice(name, sliceDriver, node string, generation int64, owned bool) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: resourcev1.ResourceSliceSpec{Driver: sliceDriver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1}},
	}
	if owned {
		s.Labels = map[string]string{LabelSimulatedBy: sliceDriver}
	}
	return s
}

func simNode(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{LabelSimulatedBy: driver}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

// TestSeed: the simulated nodes end up Ready and labelled, each with
// exactly one slice of the driver; stale slices of the driver on them are
// replaced with a higher pool generation; slices and nodes of an earlier,
// larger run are removed; everything else is left alone.
func TestSeed(t *testing.T) {
	tests := []struct {
		name            string
		nodes           int
		devicesPerNode  int
		kubeObjects     []runtime.Object
		resourceObjects []runtime.Object
		wantNodes       []string
		wantSlices      map[string]int64 // slice name -> pool generation
	}{
		{
			name: "empty store", nodes: 3, devicesPerNode: 8,
			wantNodes: []string{"sim-node-0", "sim-node-1", "sim-node-2"},
			wantSlices: map[string]int64{
				"sim-node-0-" + driver: 1, "sim-node-1-" + driver: 1, "sim-node-2-" + driver: 1,
			},
		},
		{
			name: "stale slices of the driver on simulated nodes are replaced", nodes: 2, devicesPerNode: 4,
			kubeObjects: []runtime.Object{simNode("sim-node-0", corev1.ConditionFalse)},
			resourceObjects: []runtime.Object{
				slice("sim-node-0-"+driver, driver, "sim-node-0", 4, true),
				// Published by hand (no label) for a simulated node: a
				// node agent removes every slice of its driver.
				slice("leftover", driver, "sim-node-1", 7, false),
			},
			wantNodes:  []string{"sim-node-0", "sim-node-1"},
			wantSlices: map[string]int64{"sim-node-0-" + driver: 5, "sim-node-1-" + driver: 8},
		},
		{
			name: "objects of nodes no longer simulated are removed, others kept", nodes: 1, devicesPerNode: 2,
			kubeObjects: []runtime.Object{
				simNode("sim-node-5", corev1.ConditionTrue),
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
			},
			resourceObjects: []runtime.Object{
				slice("sim-node-5-"+driver, driver, "sim-node-5", 1, true),
				slice("node-1-"+driver, driver, "node-1", 3, false),
				slice("sim-node-0-other", "other.example.com", "sim-node-0", 2, false),
			},
			wantNodes: []string{"node-1", "sim-node-0"},
			wantSlices: map[string]int64{
				"sim-node-0-" + driver: 1, "node-1-" + driver: 3, "sim-node-0-other": 2,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newSimulator(t, Options{Nodes: tc.nodes, DevicesPerNode: tc.devicesPerNode, Driver: driver, SeedWorkers: 2},
				tc.kubeObjects, tc.resourceObjects)
			s, kube, resource, ctx := h.sim, h.kube, h.resource, h.ctx
			if err := s.Seed(ctx); err != nil {
				t.Fatal(err)
			}
			nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, node := range nodes.Items {
				names = append(names, node.Name)
				if !s.nodes[node.Name] {
					continue
				}
				if !nodeReady(&node) {
					t.Errorf("node %s not Ready: %+v", node.Name, node.Status.Conditions)
				}
				for key, value := range map[string]string{corev1.LabelHostname: node.Name, LabelSimulatedBy: driver} {
					if node.Labels[key] != value {
						t.Errorf("node %s label %s=%q, want %q", node.Name, key, node.Labels[key], value)
					}
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.wantNodes) {
				t.Errorf("nodes %v, want %v", names, tc.wantNodes)
			}
			list, err := resource.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, sl := range list.Items {
				got[sl.Name] = sl.Spec.Pool.Generation
				if s.nodes[ptr.Deref(sl.Spec.NodeName, "")] && sl.Spec.Driver == driver && len(sl.Spec.Devices) != tc.devicesPerNode {
					t.Errorf("slice %s has %d devices, want %d", sl.Name, len(sl.Spec.Devices), tc.devicesPerNode)
				}
			}
			if len(got) != len(tc.wantSlices) {
				t.Errorf("slices %v, want %v", got, tc.wantSlices)
			}
			for name, generation := range tc.wantSlices {
				if g, ok := got[name]; !ok || g != generation {
					t.Errorf("slice %s: present=%v generation=%d, want generation %d (all: %v)", name, ok, g, generation, got)
				}
			}
		})
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestDesiredSlice: one pool per node named after it, devices with the
// documented attributes, split over two PCIe roots.
func TestDesiredSlice(t *testing.T) {
	tests := []struct {
		devices   int
		wantRoots []string
	}{
		{devices: 1, wantRoots: []string{"pci0000:00"}},
		{devices: 4, wantRoots: []string{"pci0000:00", "pci0000:00", "pci0000:01", "pci0000:01"}},
		{devices: 3, wantRoots: []string{"pci0000:00", "pci0000:00", "pci0000:01"}},
	}
	for _, tc := range tests {
		s := &Simulator{opts: Options{DevicesPerNode: tc.devices, Driver: driver}}
		sl := s.DesiredSlice("sim-node-3", 2)
		if sl.Name != "sim-node-3-"+driver || sl.Spec.Pool.Name != "sim-node-3" || sl.Spec.Pool.Generation != 2 || ptr.Deref(sl.Spec.NodeName, "") != "sim-node-3" {
			t.Errorf("%d devices: slice %s pool %+v node %v", tc.devices, sl.Name, sl.Spec.Pool, sl.Spec.NodeName)
		}
		var roots []string
		for i, d := range sl.Spec.Devices {
			roots = append(roots, ptr.Deref(d.Attributes["pcieRoot"].StringValue, ""))
			if got := ptr.Deref(d.Attributes["index"].IntValue, -1); got != int64(i) {
				t.Errorf("device %s index %d, want %d", d.Name, got, i)
			}
			if ptr.Deref(d.Attributes["model"].StringValue, "") != DeviceModel || ptr.Deref(d.Attributes["driverVersion"].VersionValue, "") != DriverVersion {
				t.Errorf("device %s attributes %+v", d.Name, d.Attributes)
			}
			if m := d.Capacity["memory"].Value; m.String() != DeviceMemory {
				t.Errorf("device %s memory %s, want %s", d.Name, m.String(), DeviceMemory)
			}
		}
		if !slices.Equal(roots, tc.wantRoots) {
			t.Errorf("%d devices: PCIe roots %v, want %v", tc.devices, roots, tc.wantRoots)
		}
	}
}

// TestPoolsShareDevices: the pools of all nodes share one list of
// devices, which is the node's desired slice's, and a publisher pass
// leaves it as it was.
func TestPoolsShareDevices(t *testing.T) {
	s := &Simulator{
		opts:   Options{DevicesPerNode: 4, Driver: driver},
		owners: map[string]types.UID{"sim-node-0": "uid-0", "sim-node-1": "uid-1", "sim-node-2": "uid-2"},
	}
	pools := s.pools()
	if len(pools) != 3 {
		t.Fatalf("%d pools, want 3", len(pools))
	}
	for _, pool := range pools[1:] {
		if &pool.Devices[0] != &pools[0].Devices[0] {
			t.Errorf("pool %s has a list of devices of its own", pool.Name)
		}
	}
	want := s.DesiredSlice("sim-node-0", 0).Spec.Devices
	if !apiequality.Semantic.DeepEqual(pools[0].Devices, want) {
		t.Errorf("pool devices %+v, want the desired slice's %+v", pools[0].Devices, want)
	}

	client := resourcefake.NewSimpleClientset()
	publisher, err := dra.NewPublisher(client, dra.Options{DriverName: driver})
	if err != nil {
		t.Fatal(err)
	}
	publisher.Update(pools...)
	if _, err := publisher.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(pools[0].Devices, want) {
		t.Errorf("devices after a publisher pass %+v, want %+v", pools[0].Devices, want)
	}
	published, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(published.Items) != 3 {
		t.Errorf("%d slices published, want 3", len(published.Items))
	}
}

// TestHeartbeat: a NotReady simulated node is reported Ready again and a
// deleted one is registered again.
func TestHeartbeat(t *testing.T) {
	h := newSimulator(t, Options{Nodes: 2, DevicesPerNode: 1, Driver: driver},
		[]runtime.Object{simNode("sim-node-0", corev1.ConditionFalse)}, nil)
	s, kube, ctx := h.sim, h.kube, h.ctx
	s.heartbeat(ctx)
	for _, name := range []string{"sim-node-0", "sim-node-1"} {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s: %v", name, err)
			continue
		}
		if !nodeReady(node) {
			t.Errorf("node %s not Ready after heartbeat: %+v", name, node.Status.Conditions)
		}
	}
}

// TestHeartbeatWritesOnlyWhatChanged: a node whose status is the
// simulated one and was reported recently is not written again; its
// heartbeat is renewed before it gets StatusReportInterval old, and a
// status that differs is reported at once.
func TestHeartbeatWritesOnlyWhatChanged(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h := newSimulator(t, Options{Nodes: 2, DevicesPerNode: 1, Driver: driver},
		[]runtime.Object{simNode("sim-node-0", corev1.ConditionTrue), simNode("sim-node-1", corev1.ConditionTrue)}, nil)
	s, kube, ctx := h.sim, h.kube, h.ctx
	fakeClock := testingclock.NewFakeClock(now)
	s.clock = fakeClock
	statusWrites := func() []string {
		var names []string
		for _, action := range kube.Actions() {
			if action.GetVerb() == "update" && action.GetResource().Resource == "nodes" && action.GetSubresource() == "status" {
				names = append(names, action.(k8stesting.UpdateAction).GetObject().(*corev1.Node).Name)
			}
		}
		sort.Strings(names)
		kube.ClearActions()
		return names
	}

	// Ready, but not with the simulated status: both are reported.
	s.heartbeat(ctx)
	if got, want := statusWrites(), []string{"sim-node-0", "sim-node-1"}; !slices.Equal(got, want) {
		t.Fatalf("first heartbeat: status writes %v, want %v", got, want)
	}
	fakeClock.Step(time.Minute)
	s.heartbeat(ctx)
	if got := statusWrites(); len(got) != 0 {
		t.Errorf("heartbeat a minute after the report: status writes %v, want none", got)
	}

	// Someone marks a node NotReady: reported again at the next check.
	node, err := kube.CoreV1().Nodes().Get(ctx, "sim-node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	fakeClock.Step(time.Minute)
	s.heartbeat(ctx)
	if got, want := statusWrites(), []string{"sim-node-1"}; !slices.Equal(got, want) {
		t.Errorf("heartbeat after NotReady: status writes %v, want %v", got, want)
	}

	// sim-node-0 was reported 2m ago: renewed once the next check would
	// find it older than StatusReportInterval.
	for step := 0; step < 2; step++ {
		fakeClock.Step(time.Minute)
		s.heartbeat(ctx)
		if got := statusWrites(); len(got) != 0 {
			t.Errorf("heartbeat %d: status writes %v, want none", step, got)
		}
	}
	fakeClock.Step(time.Minute)
	s.heartbeat(ctx)
	if got, want := statusWrites(), []string{"sim-node-0"}; !slices.Equal(got, want) {
		t.Errorf("heartbeat 5m after the report: status writes %v, want %v", got, want)
	}
	node, err = kube.CoreV1().Nodes().Get(ctx, "sim-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hb := node.Status.Conditions[0].LastHeartbeatTime.Time; !hb.Equal(fakeClock.Now()) {
		t.Errorf("heartbeat time %v, want %v", hb, fakeClock.Now())
	}
}

// TestSyncPod: the kubelet part, one step per sync.
func TestSyncPod(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func(node string, phase corev1.PodPhase, restart corev1.RestartPolicy, started time.Duration) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
			Spec: corev1.PodSpec{NodeName: node, RestartPolicy: restart,
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}, {Name: "side", Image: "busybox"}}},
			Status: corev1.PodStatus{Phase: phase},
		}
		if phase == corev1.PodRunning {
			p = nodeagent.RunningStatus(p, now.Add(-started))
		}
		return p
	}
	withClaim := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}}
		return p
	}
	// withExtendedClaim: the pod's extended resources have their claim
	// p-gpu-x, recorded in status.extendedResourceClaimStatus.
	withExtendedClaim := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-gpu-x",
			RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
		return p
	}
	claim := func(allocated, reserved bool) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "p-gpu-x", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-p", Controller: ptr.To(true)}}}}
		if allocated {
			c.Status.Allocation = &resourcev1.AllocationResult{}
		}
		if reserved {
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}}
		}
		return c
	}
	forNode := func(c *resourcev1.ResourceClaim, node string) *resourcev1.ResourceClaim {
		c.Status.Allocation.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}
		return c
	}
	notGenerated := withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyNever, 0))
	notGenerated.Status.ResourceClaimStatuses = nil
	terminating := pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyNever, 0)
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	tests := []struct {
		name        string
		duration    time.Duration
		pod         *corev1.Pod
		claims      []*resourcev1.ResourceClaim
		wantPhase   corev1.PodPhase
		wantReady   corev1.ConditionStatus
		wantRequeue time.Duration
	}{
		{name: "pending on a simulated node: Running", pod: pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0),
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue},
		{name: "pending with a duration: Running, look again then", duration: time.Minute,
			pod:       pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyNever, 0),
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue, wantRequeue: time.Minute},
		{name: "claim allocated and reserved: Running", pod: withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{claim(true, true)}, wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue},
		{name: "claim allocated for this node and reserved: Running", pod: withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{forNode(claim(true, true), "sim-node-0")}, wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue},
		{name: "claim allocated for another node, reserved anyway: waits", pod: withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{forNode(claim(true, true), "sim-node-1")}, wantPhase: corev1.PodPending, wantRequeue: nodeagent.DefaultClaimRetry},
		{name: "claim allocated, not reserved: waits", pod: withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{claim(true, false)}, wantPhase: corev1.PodPending, wantRequeue: nodeagent.DefaultClaimRetry},
		{name: "claim not allocated: waits", pod: withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{claim(false, false)}, wantPhase: corev1.PodPending, wantRequeue: nodeagent.DefaultClaimRetry},
		{name: "claim missing: waits", pod: withClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			wantPhase: corev1.PodPending, wantRequeue: nodeagent.DefaultClaimRetry},
		{name: "claim not generated yet: waits", pod: notGenerated, wantPhase: corev1.PodPending, wantRequeue: nodeagent.DefaultClaimRetry},
		{name: "extended resource claim allocated and reserved: Running", pod: withExtendedClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{claim(true, true)}, wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue},
		{name: "extended resource claim not allocated: waits", pod: withExtendedClaim(pod("sim-node-0", corev1.PodPending, corev1.RestartPolicyAlways, 0)),
			claims: []*resourcev1.ResourceClaim{claim(false, false)}, wantPhase: corev1.PodPending, wantRequeue: nodeagent.DefaultClaimRetry},
		{name: "not on a simulated node: left alone", pod: pod("node-1", corev1.PodPending, corev1.RestartPolicyNever, 0),
			wantPhase: corev1.PodPending},
		{name: "unbound: left alone", pod: pod("", corev1.PodPending, corev1.RestartPolicyNever, 0),
			wantPhase: corev1.PodPending},
		{name: "terminating: left alone", pod: terminating, wantPhase: corev1.PodPending},
		{name: "running, duration not over: look again when it is", duration: time.Minute,
			pod:       pod("sim-node-1", corev1.PodRunning, corev1.RestartPolicyOnFailure, 20*time.Second),
			wantPhase: corev1.PodRunning, wantRequeue: 40 * time.Second},
		{name: "running, duration over: Succeeded", duration: time.Minute,
			pod:       pod("sim-node-1", corev1.PodRunning, corev1.RestartPolicyNever, time.Minute),
			wantPhase: corev1.PodSucceeded, wantReady: corev1.ConditionFalse},
		{name: "restartPolicy Always runs on", duration: time.Minute,
			pod:       pod("sim-node-1", corev1.PodRunning, corev1.RestartPolicyAlways, time.Hour),
			wantPhase: corev1.PodRunning},
		{name: "no duration: runs on", pod: pod("sim-node-1", corev1.PodRunning, corev1.RestartPolicyNever, time.Hour),
			wantPhase: corev1.PodRunning},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newSimulator(t, Options{Nodes: 2, DevicesPerNode: 1, Driver: driver, PodDuration: tc.duration},
				[]runtime.Object{tc.pod}, nil)
			s, kube, ctx := h.sim, h.kube, h.ctx
			s.clock = testingclock.NewFakeClock(now)
			if err := h.pods.Add(tc.pod); err != nil {
				t.Fatal(err)
			}
			for _, claim := range tc.claims {
				if err := h.claims.Add(claim); err != nil {
					t.Fatal(err)
				}
			}
			requeue, err := s.agent.SyncPod(ctx, "ns/p")
			if err != nil {
				t.Fatal(err)
			}
			if requeue != tc.wantRequeue {
				t.Errorf("requeue after %v, want %v", requeue, tc.wantRequeue)
			}
			got, err := kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tc.wantPhase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tc.wantPhase)
			}
			if tc.wantReady == "" {
				return
			}
			for _, c := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
				if status := condition(got, c); status != tc.wantReady {
					t.Errorf("condition %s=%q, want %q", c, status, tc.wantReady)
				}
			}
			if status := condition(got, corev1.PodInitialized); status != corev1.ConditionTrue {
				t.Errorf("condition Initialized=%q, want True", status)
			}
			if len(got.Status.ContainerStatuses) != 2 {
				t.Fatalf("container statuses %+v, want one per container", got.Status.ContainerStatuses)
			}
			for _, cs := range got.Status.ContainerStatuses {
				running := tc.wantPhase == corev1.PodRunning
				if cs.Ready != running || ptr.Deref(cs.Started, !running) != running {
					t.Errorf("container %s ready=%v started=%v, want %v", cs.Name, cs.Ready, cs.Started, running)
				}
				if running && cs.State.Running == nil || !running && (cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0) {
					t.Errorf("container %s state %+v", cs.Name, cs.State)
				}
			}
		})
	}
}

func condition(pod *corev1.Pod, conditionType corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == conditionType {
			return c.Status
		}
	}
	return ""
}

// TestSeedNodeRequests: seeding lists the nodes once; a node that does not
// exist is registered Ready in one create, as a kubelet registers its node
// with its status, and one that exists gets one status update; no node is
// read one by one.
func TestSeedNodeRequests(t *testing.T) {
	tests := []struct {
		name        string
		kubeObjects []runtime.Object
		want        map[string]int // verb[/subresource] -> requests on nodes
	}{
		{
			name: "fresh store",
			want: map[string]int{"list": 1, "create": 3},
		},
		{
			name: "nodes of an earlier run",
			kubeObjects: []runtime.Object{
				labelled(simNode("sim-node-0", corev1.ConditionFalse)), labelled(simNode("sim-node-1", corev1.ConditionTrue)), labelled(simNode("sim-node-2", corev1.ConditionTrue)),
			},
			want: map[string]int{"list": 1, "update/status": 3},
		},
		{
			name:        "a node registered by hand without the labels",
			kubeObjects: []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-node-1"}}},
			want:        map[string]int{"list": 1, "create": 2, "update": 1, "update/status": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newSimulator(t, Options{Nodes: 3, DevicesPerNode: 1, Driver: driver}, tc.kubeObjects, nil)
			h.kube.ClearActions()
			if err := h.sim.Seed(h.ctx); err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, action := range h.kube.Actions() {
				if action.GetResource().Resource != "nodes" {
					continue
				}
				key := action.GetVerb()
				if sub := action.GetSubresource(); sub != "" {
					key += "/" + sub
				}
				got[key]++
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("requests on nodes %v, want %v", got, tc.want)
			}
			nodes, err := h.kube.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, node := range nodes.Items {
				if !nodeReady(&node) || node.Labels[LabelSimulatedBy] != driver || len(node.Status.Capacity) == 0 {
					t.Errorf("node %s not registered Ready with the labels and capacity: %+v", node.Name, node)
				}
			}
		})
	}
}

// TestRunFirstHeartbeat: Run checks the nodes one heartbeat interval
// after seeding, which has just reported each of them, not at once.
func TestRunFirstHeartbeat(t *testing.T) {
	const interval = 300 * time.Millisecond
	seeded := make(chan time.Time, 1)
	h := newSimulator(t, Options{Nodes: 3, DevicesPerNode: 1, Driver: driver, HeartbeatInterval: interval,
		OnSeeded: func() { seeded <- time.Now() }}, nil, nil)
	h.run(t)
	var at time.Time
	select {
	case at = <-seeded:
	case <-time.After(time.Minute):
		t.Fatal("not seeded")
	}
	// Seeding's own reads are done: a get of a node now is a check.
	for {
		checked := false
		for _, action := range h.kube.Actions() {
			if action.GetResource().Resource == "nodes" && action.GetVerb() == "get" {
				checked = true
			}
		}
		if checked {
			break
		}
		if time.Since(at) > time.Minute {
			t.Fatal("no heartbeat a minute after seeding")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if since := time.Since(at); since < interval-50*time.Millisecond {
		t.Errorf("first heartbeat %v after seeding, want one interval (%v)", since, interval)
	}
}

// labelled gives a node every label the simulator sets.
func labelled(node *corev1.Node) *corev1.Node {
	node.Labels = map[string]string{
		corev1.LabelHostname: node.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", LabelSimulatedBy: driver,
	}
	return node
}

// TestRunNoPods: with NoPods the simulated nodes leave a pod bound to
// them Pending, as nodes without a kubelet; by default they mark it
// Running (the control).
func TestRunNoPods(t *testing.T) {
	tests := []struct {
		name        string
		noPods      bool
		wantRunning bool
	}{
		{name: "default: the pod runs", wantRunning: true},
		{name: "no pods: the pod stays Pending", noPods: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seeded := make(chan struct{})
			h := newSimulator(t, Options{Nodes: 2, DevicesPerNode: 1, Driver: driver, NoPods: tc.noPods,
				OnSeeded: func() { close(seeded) }}, nil, nil)
			ctx := h.run(t)
			select {
			case <-seeded:
			case <-time.After(time.Minute):
				t.Fatal("not seeded")
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
				Spec:       corev1.PodSpec{NodeName: "sim-node-0", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
				Status:     corev1.PodStatus{Phase: corev1.PodPending},
			}
			if _, err := h.kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The pod reaches the informer's cache before any node loop
			// could look at it; a running loop marks it within moments.
			wait := time.Minute
			if !tc.wantRunning {
				wait = time.Second
			}
			var phase corev1.PodPhase
			for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				got, err := h.kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if phase = got.Status.Phase; phase == corev1.PodRunning {
					break
				}
			}
			if running := phase == corev1.PodRunning; running != tc.wantRunning {
				t.Errorf("pod phase %s, want Running: %v", phase, tc.wantRunning)
			}
		})
	}
}
