// Package nodeagent is the node loop of a DRA node: what a kubelet does
// for the DRA drivers of its node, with no kubelet. For the pods bound to
// its nodes it waits until every claim of a pod is allocated and reserved
// for it, asks each driver to prepare all of that driver's claims of the
// pod in one call, marks the pod Running only when every claim is
// prepared (a claim that fails keeps the pod Pending, with an event naming
// the claim and the driver's error, and is tried again with backoff),
// shows what the drivers returned (CDI device IDs) in an event, reflects
// device health in the pod's status, and unprepares once the pod is done
// or deleted. A checkpoint on disk of what it prepared lets it, after a
// restart, unprepare the claims of pods deleted while it was down and
// never prepare a claim twice.
//
// Three front ends use it: the simulator (many simulated nodes, an
// in-process fake driver), the example driver (one node, a driver built
// on this library) and the gRPC node agent (one node, any kubelet plugin
// over the kubelet's plugin registration and DRA gRPC API).
package nodeagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/worker"
)

// Drivers finds the driver that prepares a driver name's devices.
type Drivers interface {
	Preparer(driverName string) (driver.Preparer, bool)
}

// DriverMap is a fixed set of drivers by name.
type DriverMap map[string]driver.Preparer

// Preparer returns the driver of that name.
func (m DriverMap) Preparer(driverName string) (driver.Preparer, bool) {
	p, ok := m[driverName]
	return p, ok
}

// DefaultClaimRetry is how soon a pod whose claims are not ready is
// looked at again, as a kubelet retries a pod whose claims it cannot
// prepare yet.
const DefaultClaimRetry = 2 * time.Second

// Options say which nodes the agent plays kubelet for and with which
// drivers.
type Options struct {
	// Name is the component in events, field managers and logs
	// (default "node-agent").
	Name string
	// Nodes are the nodes the agent plays kubelet for.
	Nodes []string
	// NodeLabels returns the labels of a node as its kubelet knows them,
	// which a claim's node selector is matched against. Nil: the
	// hostname label only.
	NodeLabels func(nodeName string) map[string]string
	// Drivers prepare the devices of their driver name.
	Drivers Drivers
	// OnlyKnownDrivers leaves devices of drivers that Drivers does not
	// know out: their claims count as prepared elsewhere. The simulator
	// sets it (its nodes carry devices that tests publish for drivers it
	// does not run). Without it, as a kubelet does, a pod with such
	// devices stays Pending until their driver registers.
	OnlyKnownDrivers bool
	// PodDuration, when positive, makes a pod that cannot restart
	// (restartPolicy Never or OnFailure) Succeed this long after it
	// started. Zero keeps pods Running until they are deleted.
	PodDuration time.Duration
	// Checkpoint is the file that records what is prepared, so that a
	// restarted agent unprepares the claims of pods deleted meanwhile and
	// prepares nothing twice. Empty: kept in memory only.
	Checkpoint string
	// Clock, if set, replaces the real clock (tests).
	Clock clock.PassiveClock
	// NodeClient, if set, is the client of a node's own identity, which
	// writes the status of the node's pods (the simulator plays many
	// nodes, each as itself). Nil: the agent's client.
	NodeClient func(nodeName string) kubernetes.Interface
	// ClaimRetry is how soon a pod whose claims are not allocated and
	// reserved for it yet is looked at again (default DefaultClaimRetry): the agent gets
	// claims by name and watches none. A front end that watches claims
	// may call EnqueueConsumers to look sooner.
	ClaimRetry time.Duration
	// FinishDeletions makes the agent remove a deleted pod of its nodes
	// (a delete with grace period 0 and the pod's UID as precondition)
	// once its claims are unprepared, as a kubelet does once the pod's
	// containers are gone. For a kube-apiserver, where nothing else would;
	// a dra-apiserver's pod termination controller does it for its pods.
	FinishDeletions bool
}

// ClaimGetter gets a claim of a pod on a node by name, as a kubelet gets
// the claims of its pods: a node identity may get the claims allocated on
// its node, one by name, and may list or watch none.
type ClaimGetter interface {
	GetClaim(ctx context.Context, nodeName, namespace, name string) (*resourcev1.ResourceClaim, error)
}

// ClaimsFromClient gets claims through the client of the node's identity.
type ClaimsFromClient func(nodeName string) versioned.Interface

// GetClaim implements ClaimGetter.
func (f ClaimsFromClient) GetClaim(ctx context.Context, nodeName, namespace, name string) (*resourcev1.ResourceClaim, error) {
	return f(nodeName).ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ClaimsFromLister gets claims from an informer's cache (tests, and
// callers allowed to watch every claim).
type ClaimsFromLister struct {
	Lister resourcelisters.ResourceClaimLister
}

// GetClaim implements ClaimGetter.
func (l ClaimsFromLister) GetClaim(_ context.Context, _, namespace, name string) (*resourcev1.ResourceClaim, error) {
	return l.Lister.ResourceClaims(namespace).Get(name)
}

// Agent plays the kubelet's DRA part for its nodes.
type Agent struct {
	opts       Options
	kubeClient kubernetes.Interface
	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	podSynced  cache.InformerSynced
	claims     ClaimGetter
	queue      workqueue.TypedRateLimitingInterface[string]
	clock      clock.PassiveClock
	nodes      map[string]bool
	// recorder is set by Run; tests that call SyncPod set their own.
	recorder record.EventRecorder

	mu sync.Mutex
	// prepared are the pods whose claims are prepared, by key.
	prepared map[string]preparedPod
	// holders counts the records of prepared that hold each claim
	// (shared.go); claimLocks serialize the pods of one claim.
	holders    map[holderKey]int
	claimLocks claimLocks
	// health is the last reported health of devices, by driver, pool and
	// device (health.go).
	health map[deviceID]deviceHealth
}

// preparedPod is what a pod holds on its node: its UID (a pod deleted
// and created again under the same name is another pod) and the claims
// prepared for it, by driver.
type preparedPod struct {
	UID string `json:"uid"`
	// Node is the pod's node (empty in records written before this
	// field: those are of an agent of one node).
	Node   string      `json:"node,omitempty"`
	Claims []heldClaim `json:"claims"`
	// Complete: every claim of the pod is prepared; the pod may start.
	Complete bool `json:"complete,omitempty"`
}

// heldClaim is one claim prepared by one driver.
type heldClaim struct {
	Driver    string `json:"driver"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// New wires the pod informer and reads the checkpoint. Call it before
// starting the informer factory. The pod informer may watch more than the
// agent's nodes; it looks at its own only. Claims are got by name when a
// pod needs them.
func New(logger klog.Logger, kubeClient kubernetes.Interface,
	podInformer coreinformers.PodInformer, claims ClaimGetter, opts Options) (*Agent, error) {
	if len(opts.Nodes) == 0 {
		return nil, fmt.Errorf("node agent needs at least one node")
	}
	if opts.Drivers == nil {
		return nil, fmt.Errorf("node agent needs drivers")
	}
	if claims == nil {
		return nil, fmt.Errorf("node agent needs a claim getter")
	}
	if opts.Name == "" {
		opts.Name = "node-agent"
	}
	if opts.ClaimRetry <= 0 {
		opts.ClaimRetry = DefaultClaimRetry
	}
	a := &Agent{
		opts:       opts,
		kubeClient: kubeClient,
		podLister:  podInformer.Lister(),
		podIndexer: podInformer.Informer().GetIndexer(),
		podSynced:  podInformer.Informer().HasSynced,
		claims:     claims,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: opts.Name},
		),
		clock:    opts.Clock,
		nodes:    make(map[string]bool, len(opts.Nodes)),
		prepared: map[string]preparedPod{},
		holders:  map[holderKey]int{},
		health:   map[deviceID]deviceHealth{},
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	for _, name := range opts.Nodes {
		a.nodes[name] = true
	}
	if err := a.loadCheckpoint(); err != nil {
		return nil, err
	}
	// A claim reserved for a PodGroup brings back the group's pods.
	if err := podclaims.AddPodsByGroupIndex(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("add pod indexer: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueuePod,
		UpdateFunc: func(_, obj any) { a.enqueuePod(obj) },
		DeleteFunc: a.enqueueDeletedPod,
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	return a, nil
}

// Run plays kubelet for the pods on the agent's nodes until ctx is done.
// The pods of the checkpoint are looked at first: those deleted while the
// agent was down are unprepared.
func (a *Agent) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting node agent", "nodes", len(a.nodes), "checkpoint", a.opts.Checkpoint)
	defer logger.Info("Shutting down node agent")
	recorder, stopRecording := worker.StartRecorder(ctx, a.kubeClient, scheme.Scheme, a.opts.Name, 1)
	defer stopRecording()
	a.recorder = recorder
	a.mu.Lock()
	for key := range a.prepared {
		a.queue.Add(key)
	}
	a.mu.Unlock()
	worker.Run(ctx, a.queue, workers, a.handle, a.podSynced)
}

// SetRecorder sets the event recorder of an agent whose SyncPod is called
// without Run (tests).
func (a *Agent) SetRecorder(recorder record.EventRecorder) { a.recorder = recorder }

// Resync looks at every pod of the agent's nodes again, for example once
// a driver registered: pods that waited for it may start now.
func (a *Agent) Resync() {
	pods, err := a.podLister.List(everything)
	if err != nil {
		return
	}
	for _, pod := range pods {
		a.enqueuePod(pod)
	}
}

// enqueuePod queues pods bound to the agent's nodes that still have a
// status transition or an unprepare ahead of them. Cheap: no API calls.
func (a *Agent) enqueuePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !a.nodes[pod.Spec.NodeName] {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	// A pod that is done or deleted needs the agent only for what it
	// prepared, and, where the agent finishes deletions, a deleted pod
	// to remove, claims or not.
	finish := a.opts.FinishDeletions && pod.DeletionTimestamp != nil
	if (pod.DeletionTimestamp != nil || podDone(pod)) && !a.isPrepared(key) && !finish {
		return
	}
	a.queue.Add(key)
}

// enqueueDeletedPod queues a deleted pod whose claims are still prepared.
func (a *Agent) enqueueDeletedPod(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if a.isPrepared(key) {
		a.queue.Add(key)
	}
}

func (a *Agent) isPrepared(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.prepared[key]
	return ok
}

// EnqueueConsumers queues the pods a claim is reserved for, directly or
// through their PodGroup: a pod whose claims were not ready yet may start
// now. For front ends that watch claims; the agent itself looks again
// after Options.ClaimRetry.
func (a *Agent) EnqueueConsumers(obj any) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || claim.Status.Allocation == nil {
		return
	}
	for _, consumer := range claim.Status.ReservedFor {
		switch {
		case consumer.APIGroup == "" && consumer.Resource == "pods":
			a.queue.Add(claim.Namespace + "/" + consumer.Name)
		case podclaims.IsGroupConsumer(consumer):
			pods, _ := a.podIndexer.ByIndex(podclaims.PodsByGroupIndex, claim.Namespace+"/"+consumer.Name)
			for _, obj := range pods {
				if pod, ok := obj.(*corev1.Pod); ok && a.nodes[pod.Spec.NodeName] {
					a.queue.Add(pod.Namespace + "/" + pod.Name)
				}
			}
		}
	}
}

// handle moves one pod along and looks at it again when it asks to.
func (a *Agent) handle(ctx context.Context, key string) {
	requeueAfter, err := a.SyncPod(ctx, key)
	worker.Requeue(ctx, a.queue, key, requeueAfter, err, "Node agent failed on pod", "pod")
}
