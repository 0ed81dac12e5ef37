// Package simulator stands in for nodes, their kubelets and a DRA driver
// in standalone mode, so whole flows run with no real machine: it
// registers N Ready nodes, publishes per node the pool of a fake GPU
// driver through the driver library's Publisher (one slice up to 128
// devices, owned by the Node), keeps the nodes' Ready condition fresh, and
// plays kubelet for the pods bound to its nodes: it prepares their claims
// through a driver.Preparer before marking them Running (started, ready
// containers), optionally Succeeded after a while, so claims get released
// and deleted, and unprepares them when the pods are done (unless
// Options.NoPods: nodes without a kubelet). With a binding
// condition (Options.BindingCondition) its devices list it, and its driver
// reports it, or the failure condition on failing nodes, in the claims'
// device status a while after the allocation (binding.go).
//
// Like a real node agent, it removes the slices of its driver on its nodes
// when it starts and publishes them anew, so no orphans of an earlier run
// survive; slices and nodes of an earlier run that simulated more nodes are
// removed too.
package simulator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	dra "github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/driver/nodeagent"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/codec"
	"github.com/draplane/draplane/internal/worker"
)

const (
	// ControllerName names the simulator in logs and its work queue.
	ControllerName = "simulator"
	// NodePrefix starts the name of every simulated node: sim-node-0, ...
	NodePrefix = "sim-node-"
	// DefaultDriver is the fake driver's name.
	DefaultDriver = "gpu.sim.draplane.dev"
	// DefaultDevicesPerNode is how many GPUs each simulated node has.
	DefaultDevicesPerNode = 8
	// DefaultHeartbeatInterval is how often the nodes are checked: a
	// deleted node is registered again and a status that differs from
	// the simulated one (NotReady, other capacity) is reported again.
	DefaultHeartbeatInterval = time.Minute
	// StatusReportInterval bounds the age of an unchanged node status:
	// a heartbeat writes it only when it would be older than that at the
	// next check, as a kubelet reports an unchanged status every 5m
	// (nodeStatusReportFrequency). Nothing here times nodes out, so the
	// heartbeat only has to show that the node is alive.
	StatusReportInterval = 5 * time.Minute
	// LabelSimulatedBy marks the nodes and slices the simulator owns; its
	// value is the driver name. Only objects with it are removed when
	// they are no longer simulated.
	LabelSimulatedBy = "simulator.draplane.dev/driver"
	// DeviceModel is the model attribute of every simulated GPU.
	DeviceModel = "SIM-GPU-80GB"
	// DeviceMemory is the memory capacity of every simulated GPU.
	DeviceMemory = "80Gi"
	// DriverVersion is the driverVersion attribute of every device.
	DriverVersion = "1.0.0"
	// PCIeRootsPerNode: the node's GPUs are split evenly over this many
	// PCIe roots, so a claim can ask for GPUs behind the same root with
	// matchAttribute "<driver>/pcieRoot".
	PCIeRootsPerNode = 2
	// ReasonSimulated is the reason on the conditions the simulator sets.
	ReasonSimulated = "Simulated"
	// nodeAgentWritesPerSecond is a node agent's slice publishing budget
	// (the driver library's default).
	nodeAgentWritesPerSecond = 10
)

// Options say what is simulated.
type Options struct {
	// Nodes is how many nodes are simulated: sim-node-0 .. sim-node-<N-1>.
	Nodes int
	// DevicesPerNode is how many GPUs each node's slice has.
	DevicesPerNode int
	// Driver is the fake driver's name (a DNS subdomain).
	Driver string
	// PodDuration, when positive, makes a pod that cannot restart
	// (restartPolicy Never or OnFailure) Succeed this long after it
	// started. Zero keeps pods Running until they are deleted.
	PodDuration time.Duration
	// HeartbeatInterval is how often the nodes' Ready condition is renewed.
	HeartbeatInterval time.Duration
	// NoPods leaves the pods bound to the simulated nodes alone, as nodes
	// without a kubelet would (upstream's scheduler_perf runs its fake
	// nodes so): their claims are not prepared and they stay Pending.
	// The nodes still register, report Ready and publish their slices,
	// and the driver still reports binding conditions. For measuring
	// placement alone.
	NoPods bool
	// SeedWorkers bound the concurrent writes while seeding nodes and slices.
	SeedWorkers int
	// OnSeeded, if set, is called once every node is Ready with its slice.
	OnSeeded func()
	// Preparer prepares the claims of pods on the simulated nodes before
	// they run. Nil: the fake driver's, which prepares every claim unless
	// the claim has the annotation AnnotationPrepareError.
	Preparer dra.Preparer
	// BindingCondition, when set, is listed in the bindingConditions of
	// every device, with BindingFailureCondition (default
	// DefaultBindingFailureCondition) as its failure condition: pods
	// that get a device are bound only once the driver reports it ready,
	// which it does BindingDelay after the allocation, or reports the
	// failure condition instead on the nodes in BindingFailureNodes.
	BindingCondition        string
	BindingFailureCondition string
	BindingDelay            time.Duration
	BindingFailureNodes     []string
	// NodeClients, if set, are the clients of a simulated node's own
	// identity (user draplane:node:<node> in the groups draplane:nodes
	// and draplane:driver:<driver>): each node registers itself, reports
	// its status, publishes its slices, gets its pods' claims and writes
	// their status as itself, restricted by the server to its own
	// objects. Nil: the simulator's clients. The simulator's own clients
	// remove the nodes and slices of an earlier run and report binding
	// conditions (the part of a driver that runs as a controller, which
	// watches claims).
	NodeClients func(nodeName string) (kubernetes.Interface, versioned.Interface)
	// SliceInformer, if set, is a shared ResourceSlice informer that the
	// publisher watches the simulated slices through (it repairs what
	// someone else deletes or changes); its owner starts it. Nil: the
	// publisher watches the driver's slices with an informer of its own.
	SliceInformer cache.SharedIndexInformer
	// SkipNodeOperations, when set, is the skipNodeOperations of every
	// node's slice: the simulated nodes then do not call the driver for
	// those operations (needs the DRAOptionalNodeOperations gate).
	SkipNodeOperations []resourcev1.SkipNodeOperation
}

// NodeName is the name of simulated node i.
func NodeName(i int) string { return fmt.Sprintf("%s%d", NodePrefix, i) }

// SliceName is the name of the slice the driver publishes for a node.
func SliceName(nodeName, driver string) string { return nodeName + "-" + driver }

// Simulator plays kubelet and DRA driver for its nodes.
type Simulator struct {
	opts           Options
	kubeClient     kubernetes.Interface
	resourceClient versioned.Interface
	claimLister    resourcelisters.ResourceClaimLister
	claimSynced    cache.InformerSynced
	// agent is the node loop (driver/nodeagent) for the simulated nodes:
	// it prepares the claims of their pods through the fake driver, marks
	// the pods Running (Succeeded after PodDuration) and unprepares. Nil
	// with Options.NoPods.
	agent *nodeagent.Agent
	// bindingQueue holds the claims whose binding conditions the driver
	// is to report (binding.go).
	bindingQueue workqueue.TypedRateLimitingInterface[string]
	clock        clock.Clock
	// nodes is the set of simulated node names.
	nodes map[string]bool
	// publisher keeps the nodes' slices published.
	publisher *dra.Publisher

	mu sync.Mutex
	// owners are the UIDs of the nodes as registered, for the slices'
	// owner references; minGenerations the generations the node's pool
	// starts above after removeStale.
	owners         map[string]types.UID
	minGenerations map[string]int64
}

// simulatorClock is the simulator's clock as the node agent reads it, so
// that tests that replace the simulator's clock replace the agent's too.
type simulatorClock struct{ s *Simulator }

func (c simulatorClock) Now() time.Time                  { return c.s.clock.Now() }
func (c simulatorClock) Since(t time.Time) time.Duration { return c.s.clock.Since(t) }

// New wires the pod and claim informers. Call it before starting the
// informer factories.
func New(logger klog.Logger, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	podInformer coreinformers.PodInformer, claimInformer resourceinformers.ResourceClaimInformer, opts Options) (*Simulator, error) {
	if opts.Nodes < 1 {
		return nil, fmt.Errorf("simulator needs at least one node, got %d", opts.Nodes)
	}
	if opts.DevicesPerNode < 1 {
		return nil, fmt.Errorf("simulator needs at least one device per node, got %d", opts.DevicesPerNode)
	}
	if opts.Driver == "" {
		opts.Driver = DefaultDriver
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.SeedWorkers < 1 {
		opts.SeedWorkers = 16
	}
	if opts.BindingCondition != "" && opts.BindingFailureCondition == "" {
		opts.BindingFailureCondition = DefaultBindingFailureCondition
	}
	s := &Simulator{
		opts:           opts,
		kubeClient:     kubeClient,
		resourceClient: resourceClient,
		claimLister:    claimInformer.Lister(),
		claimSynced:    claimInformer.Informer().HasSynced,
		bindingQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-binding"},
		),
		clock:          clock.RealClock{},
		nodes:          make(map[string]bool, opts.Nodes),
		owners:         map[string]types.UID{},
		minGenerations: map[string]int64{},
	}
	preparer := opts.Preparer
	if preparer == nil {
		preparer = &fakePreparer{driver: opts.Driver}
	}
	publisher, err := dra.NewPublisher(resourceClient, dra.Options{
		DriverName: opts.Driver,
		// The simulator publishes for as many node agents as it
		// simulates: it gets the budget of all of them (a node agent's
		// default is 10 writes/s), and at least one that does not make
		// seeding hundreds of nodes wait. The nodes' pools are written
		// as concurrently as the nodes are registered.
		WritesPerSecond: max(1000, nodeAgentWritesPerSecond*float64(opts.Nodes)),
		NodeClient:      s.nodeResourceClient,
		Workers:         opts.SeedWorkers,
		SliceInformer:   opts.SliceInformer,
		SliceName: func(poolName string, index int) string {
			if index == 0 {
				return SliceName(poolName, opts.Driver)
			}
			return fmt.Sprintf("%s-%d", SliceName(poolName, opts.Driver), index)
		},
	})
	if err != nil {
		return nil, err
	}
	s.publisher = publisher
	names := make([]string, opts.Nodes)
	for i := range opts.Nodes {
		names[i] = NodeName(i)
		s.nodes[names[i]] = true
	}
	if !opts.NoPods {
		if s.agent, err = s.newAgent(logger, kubeClient, podInformer, names, preparer); err != nil {
			return nil, err
		}
	}
	// The simulator's own watch of the claims (for the binding
	// conditions) tells the node loop when a pod's claims are ready; the
	// node loop gets them by name as each node.
	_, err = claimInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			s.enqueueBinding(obj)
			s.enqueueConsumers(obj)
		},
		UpdateFunc: func(_, obj any) {
			s.enqueueBinding(obj)
			s.enqueueConsumers(obj)
		},
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("add claim event handler: %w", err)
	}
	return s, nil
}

// newAgent builds the node loop of the simulated nodes (names), which
// prepares their pods' claims with preparer.
func (s *Simulator) newAgent(logger klog.Logger, kubeClient kubernetes.Interface, podInformer coreinformers.PodInformer, names []string, preparer dra.Preparer) (*nodeagent.Agent, error) {
	return nodeagent.New(logger, kubeClient, podInformer, nodeagent.ClaimsFromClient(s.nodeResourceClient), nodeagent.Options{
		NodeClient: s.nodeKubeClient,
		Name:       ControllerName,
		Nodes:      names,
		NodeLabels: s.nodeLabels,
		Drivers:    nodeagent.DriverMap{s.opts.Driver: preparer},
		// Tests publish devices of drivers the simulator does not run
		// on simulated nodes; their pods start as if those were
		// prepared elsewhere.
		OnlyKnownDrivers: true,
		PodDuration:      s.opts.PodDuration,
		Clock:            simulatorClock{s},
	})
}

// enqueueConsumers has the node loop look at the pods that use the claim
// (obj), if the nodes run pods.
func (s *Simulator) enqueueConsumers(obj any) {
	if s.agent != nil {
		s.agent.EnqueueConsumers(obj)
	}
}

// nodeKubeClient is the core client of a node's identity.
func (s *Simulator) nodeKubeClient(nodeName string) kubernetes.Interface {
	if s.opts.NodeClients == nil {
		return s.kubeClient
	}
	kubeClient, _ := s.opts.NodeClients(nodeName)
	return kubeClient
}

// nodeResourceClient is the resource client of a node's identity.
func (s *Simulator) nodeResourceClient(nodeName string) versioned.Interface {
	if s.opts.NodeClients == nil {
		return s.resourceClient
	}
	_, resourceClient := s.opts.NodeClients(nodeName)
	return resourceClient
}

// Run seeds nodes and slices, then plays kubelet for the pods on its nodes
// (unless Options.NoPods) and renews the nodes' heartbeat until ctx is
// done.
func (s *Simulator) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer s.bindingQueue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting simulator", "nodes", s.opts.Nodes, "devicesPerNode", s.opts.DevicesPerNode, "driver", s.opts.Driver, "podDuration", s.opts.PodDuration)
	defer logger.Info("Shutting down simulator")

	// Seeding fails only when the API does; keep trying, like a kubelet
	// that cannot register yet.
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		err := s.Seed(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		delay := backoff.Step()
		logger.Error(err, "Seeding simulated nodes failed, retrying", "after", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	if s.opts.OnSeeded != nil {
		s.opts.OnSeeded()
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, s.claimSynced) {
		return
	}
	go s.publisher.Run(ctx)
	// Seeding has just reported every node: the first check is due one
	// interval from now. With thousands of nodes a check right away was
	// a read of each, all finding nothing to write.
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.HeartbeatInterval):
		}
		wait.UntilWithContext(ctx, s.heartbeat, s.opts.HeartbeatInterval)
	}()
	if s.bindingEnabled() {
		go worker.Run(ctx, s.bindingQueue, 1, func(ctx context.Context, key string) {
			requeueAfter, err := s.syncBinding(ctx, key)
			worker.Requeue(ctx, s.bindingQueue, key, requeueAfter, err, "Reporting binding conditions failed", "claim")
		}, s.claimSynced)
	}
	if s.agent == nil {
		<-ctx.Done()
		return
	}
	s.agent.Run(ctx, workers)
}

// Seed registers every simulated node as Ready, removes the stale slices
// of the driver and publishes one slice per node. Large numbers of nodes
// log their progress.
func (s *Simulator) Seed(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	start := s.clock.Now()
	generations, existing, err := s.removeStale(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for name, generation := range generations {
		s.minGenerations[name] = generation + 1
	}
	s.mu.Unlock()
	var done atomic.Int64
	total := int64(s.opts.Nodes)
	err = s.forEachNode(ctx, func(ctx context.Context, name string) error {
		if err := s.registerNode(ctx, name, existing[name]); err != nil {
			return err
		}
		// Progress in tenths, so 500 nodes log ten lines, not 500.
		if n := done.Add(1); total >= 50 && n*10/total != (n-1)*10/total {
			logger.Info("Seeding simulated nodes", "done", n, "total", total)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.publisher.Update(s.pools()...)
	if _, err := s.publisher.Sync(ctx); err != nil {
		return fmt.Errorf("publish the simulated nodes' slices: %w", err)
	}
	logger.Info("Simulated nodes ready", "nodes", s.opts.Nodes, "devices", s.opts.Nodes*s.opts.DevicesPerNode,
		"driver", s.opts.Driver, "duration", s.clock.Since(start).Round(time.Millisecond))
	return nil
}

// forEachNode runs f for every simulated node on SeedWorkers goroutines
// and returns the first error.
func (s *Simulator) forEachNode(ctx context.Context, f func(context.Context, string) error) error {
	return forEach(ctx, s.opts.SeedWorkers, s.opts.Nodes, func(ctx context.Context, i int) error { return f(ctx, NodeName(i)) })
}

// forEach runs f for 0 .. n-1 on at most workers goroutines and returns
// the first error; an error stops the items not started yet.
func forEach(ctx context.Context, workers, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range items {
				if err := f(ctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case items <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(items)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// removeStale deletes the driver's slices on the simulated nodes (a node
// agent starts from a clean slate) and the slices and nodes of an earlier
// run that are no longer simulated, SeedWorkers at a time. It returns the
// highest pool generation seen per node, so the new slices supersede the
// old ones, and the simulated nodes that exist already.
func (s *Simulator) removeStale(ctx context.Context) (map[string]int64, map[string]*corev1.Node, error) {
	logger := klog.FromContext(ctx)
	generations, removedSlices, err := s.removeStaleSlices(ctx)
	if err != nil {
		return nil, nil, err
	}
	existing, removedNodes, err := s.removeStaleNodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	if removedSlices > 0 || removedNodes > 0 {
		logger.Info("Removed stale objects of the simulated driver", "slices", removedSlices, "nodes", removedNodes)
	}
	return generations, existing, nil
}

// removeStaleSlices deletes the driver's slices on the simulated nodes
// and its slices on nodes no longer simulated.
func (s *Simulator) removeStaleSlices(ctx context.Context) (map[string]int64, int, error) {
	list, err := s.resourceClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.driver", s.opts.Driver).String(),
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list slices of driver %s: %w", s.opts.Driver, err)
	}
	generations := map[string]int64{}
	var stale []*resourcev1.ResourceSlice
	for i := range list.Items {
		slice := &list.Items[i]
		nodeName := ptr.Deref(slice.Spec.NodeName, "")
		ours := slice.Labels[LabelSimulatedBy] == s.opts.Driver
		if slice.Spec.Driver != s.opts.Driver || !(s.nodes[nodeName] || ours) {
			// Another driver's, or published by hand for a node we
			// do not simulate: not ours to remove.
			continue
		}
		if s.nodes[nodeName] {
			generations[nodeName] = max(generations[nodeName], slice.Spec.Pool.Generation)
		}
		stale = append(stale, slice)
	}
	err = forEach(ctx, s.opts.SeedWorkers, len(stale), func(ctx context.Context, i int) error {
		slice := stale[i]
		if _, err := dra.DeleteSlice(ctx, s.resourceClient, slice); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("remove stale slice %s: %w", slice.Name, err)
		}
		return nil
	})
	return generations, len(stale), err
}

// removeStaleNodes deletes the nodes an earlier run simulated that this
// one does not, and returns the simulated nodes that exist already.
func (s *Simulator) removeStaleNodes(ctx context.Context) (map[string]*corev1.Node, int, error) {
	list, err := s.kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("list nodes: %w", err)
	}
	existing := map[string]*corev1.Node{}
	var stale []*corev1.Node
	for i := range list.Items {
		node := &list.Items[i]
		switch {
		case s.nodes[node.Name]:
			existing[node.Name] = node
		case node.Labels[LabelSimulatedBy] == s.opts.Driver:
			stale = append(stale, node)
		}
	}
	err = forEach(ctx, s.opts.SeedWorkers, len(stale), func(ctx context.Context, i int) error {
		node := stale[i]
		err := s.kubeClient.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &node.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("remove node %s that is no longer simulated: %w", node.Name, err)
		}
		return nil
	})
	return existing, len(stale), err
}

// registerNode makes sure the node exists with the simulator's labels and
// reports it Ready. A node that does not exist yet (existing is nil) is
// created Ready in one request, as a kubelet registers its node with its
// status; one that exists gets the missing labels and a fresh status.
func (s *Simulator) registerNode(ctx context.Context, name string, existing *corev1.Node) error {
	core := s.nodeKubeClient(name).CoreV1()
	nodes := core.Nodes()
	node := existing
	if node == nil {
		desired := s.desiredNode(name)
		now := metav1.NewTime(s.clock.Now())
		desired.Status.Conditions = []corev1.NodeCondition{readyCondition(now, now)}
		// Only the new node's UID is kept.
		opts := metav1.CreateOptions{FieldManager: ControllerName}
		created, err := codec.WriteForMetadata(ctx, core.RESTClient(), func(c *rest.RESTClient) *rest.Request {
			return c.Post().Resource("nodes").VersionedParams(&opts, scheme.ParameterCodec)
		}, desired, func() (*corev1.Node, error) {
			return nodes.Create(ctx, desired, opts)
		})
		switch {
		case err == nil:
			s.setOwner(name, created.GetUID())
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("register node %s: %w", name, err)
		}
		if node, err = nodes.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
	}
	if missing := missingLabels(node.Labels, s.nodeLabels(name)); len(missing) > 0 {
		node = node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		for key, value := range missing {
			node.Labels[key] = value
		}
		var err error
		if node, err = nodes.Update(ctx, node, metav1.UpdateOptions{FieldManager: ControllerName}); err != nil {
			return fmt.Errorf("label node %s: %w", name, err)
		}
	}
	s.setOwner(name, node.UID)
	return s.reportReady(ctx, node)
}

// setOwner records the UID of a registered node, for its slices' owner
// reference.
func (s *Simulator) setOwner(name string, uid types.UID) {
	s.mu.Lock()
	s.owners[name] = uid
	s.mu.Unlock()
}

// readyCondition is the Ready condition the simulator reports.
func readyCondition(heartbeat, transition metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type:               corev1.NodeReady,
		Status:             corev1.ConditionTrue,
		Reason:             ReasonSimulated,
		Message:            "simulated by dra-apiserver --simulate-nodes",
		LastHeartbeatTime:  heartbeat,
		LastTransitionTime: transition,
	}
}

// reportReady writes the node status a kubelet would: capacity, address
// and a Ready condition with a fresh heartbeat.
func (s *Simulator) reportReady(ctx context.Context, node *corev1.Node) error {
	node = node.DeepCopy()
	now := metav1.NewTime(s.clock.Now())
	desired := s.desiredNode(node.Name).Status
	node.Status.Capacity = desired.Capacity
	node.Status.Allocatable = desired.Allocatable
	node.Status.Addresses = desired.Addresses
	node.Status.NodeInfo = desired.NodeInfo
	ready := readyCondition(now, now)
	found := false
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			ready.LastTransitionTime = c.LastTransitionTime
		}
		*c = ready
		found = true
	}
	if !found {
		node.Status.Conditions = append(node.Status.Conditions, ready)
	}
	if _, err := s.nodeKubeClient(node.Name).CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{FieldManager: ControllerName}); err != nil {
		return fmt.Errorf("report node %s ready: %w", node.Name, err)
	}
	return nil
}

// reportedRecently: the node's status is the simulated one, Ready, and
// its heartbeat is still young enough at the next check (see
// StatusReportInterval), so writing it again would change nothing but
// the heartbeat time.
func (s *Simulator) reportedRecently(node *corev1.Node) bool {
	desired := s.desiredNode(node.Name).Status
	if !equality.Semantic.DeepEqual(node.Status.Capacity, desired.Capacity) ||
		!equality.Semantic.DeepEqual(node.Status.Allocatable, desired.Allocatable) ||
		!equality.Semantic.DeepEqual(node.Status.Addresses, desired.Addresses) ||
		node.Status.NodeInfo != desired.NodeInfo {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			age := s.clock.Since(c.LastHeartbeatTime.Time)
			return c.Status == corev1.ConditionTrue && c.Reason == ReasonSimulated && age >= 0 && age+s.opts.HeartbeatInterval <= StatusReportInterval
		}
	}
	return false
}

// heartbeat renews the Ready condition of every node and registers nodes
// that were deleted again, as a kubelet would. An unchanged status is
// written only every StatusReportInterval.
func (s *Simulator) heartbeat(ctx context.Context) {
	logger := klog.FromContext(ctx)
	err := s.forEachNode(ctx, func(ctx context.Context, name string) error {
		// From the watch cache: most checks only find the node as it
		// was reported, and a node the cache misses is looked up again
		// by registerNode. A write on a stale copy fails with a
		// conflict and is tried again at the next check.
		node, err := s.nodeKubeClient(name).CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		if apierrors.IsNotFound(err) {
			logger.Info("Simulated node was deleted, registering it again", "node", name)
			if err = s.registerNode(ctx, name, nil); err == nil {
				// The slices went with the old node; publish them
				// again, owned by the new one.
				s.publisher.Update(s.pools()...)
			}
		} else if err == nil && !s.reportedRecently(node) {
			err = s.reportReady(ctx, node)
		}
		if err != nil && ctx.Err() == nil {
			// One node's failure must not stop the others' heartbeat.
			logger.Error(err, "Node heartbeat failed", "node", name)
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		logger.Error(err, "Node heartbeat failed")
	}
}

func (s *Simulator) nodeLabels(name string) map[string]string {
	return map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		LabelSimulatedBy:       s.opts.Driver,
	}
}

func missingLabels(have, want map[string]string) map[string]string {
	missing := map[string]string{}
	for key, value := range want {
		if have[key] != value {
			missing[key] = value
		}
	}
	return missing
}

// desiredNode is the node as the simulator registers it.
func (s *Simulator) desiredNode(name string) *corev1.Node {
	index := strings.TrimPrefix(name, NodePrefix)
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.nodeLabels(name)},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalIP, Address: nodeIP(index)},
			},
			NodeInfo: corev1.NodeSystemInfo{
				OSImage:                 "draplane simulated node",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
				KubeletVersion:          "draplane-simulator",
				ContainerRuntimeVersion: "sim://" + DriverVersion,
			},
		},
	}
}

// nodeIP gives node i an address in 10.128.0.0/9 that is stable across runs.
func nodeIP(index string) string {
	var i int
	fmt.Sscan(index, &i)
	return fmt.Sprintf("10.%d.%d.%d", 128+(i>>16)&127, (i>>8)&255, i&255)
}

// pools are the pools the fake driver publishes: one per registered
// node, owned by its Node. Every node has the same devices, so the pools
// share one list of them (the publisher only reads a pool's devices): a
// list per node grew the process's heap with every node.
func (s *Simulator) pools() []dra.Pool {
	devices := s.devices()
	s.mu.Lock()
	defer s.mu.Unlock()
	pools := make([]dra.Pool, 0, len(s.owners))
	for name, uid := range s.owners {
		pools = append(pools, dra.Pool{
			Name:               name,
			NodeName:           name,
			Devices:            devices,
			MinGeneration:      s.minGenerations[name],
			SkipNodeOperations: s.opts.SkipNodeOperations,
			Owner:              dra.NodeOwner(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}),
		})
	}
	return pools
}

// DesiredSlice is the slice the fake driver publishes for a node: one
// pool named after the node with DevicesPerNode GPUs gpu-0, gpu-1, ...
// Each has the attributes model, index, pcieRoot (the GPUs are split over
// PCIeRootsPerNode roots) and driverVersion, and a memory capacity.
func (s *Simulator) DesiredSlice(nodeName string, generation int64) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   SliceName(nodeName, s.opts.Driver),
			Labels: map[string]string{LabelSimulatedBy: s.opts.Driver},
		},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   s.opts.Driver,
			NodeName: ptr.To(nodeName),
			Pool: resourcev1.ResourcePool{
				Name:               nodeName,
				Generation:         generation,
				ResourceSliceCount: 1,
			},
			Devices:            s.devices(),
			SkipNodeOperations: slices.Clone(s.opts.SkipNodeOperations),
		},
	}
}

// devices are the GPUs of a simulated node, the same on every node.
func (s *Simulator) devices() []resourcev1.Device {
	devices := make([]resourcev1.Device, s.opts.DevicesPerNode)
	perRoot := (s.opts.DevicesPerNode + PCIeRootsPerNode - 1) / PCIeRootsPerNode
	for i := range devices {
		devices[i] = resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model":         {StringValue: ptr.To(DeviceModel)},
				"index":         {IntValue: ptr.To(int64(i))},
				"pcieRoot":      {StringValue: ptr.To(fmt.Sprintf("pci0000:%02x", i/perRoot))},
				"driverVersion": {VersionValue: ptr.To(DriverVersion)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: resource.MustParse(DeviceMemory)},
			},
		}
		s.withBindingConditions(&devices[i])
	}
	return devices
}
