package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/auth/rbac"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
	"github.com/draplane/draplane/simulator"
)

// SimulatorConfig says what the simulator simulates.
//
// The simulator is leader-elected on a Lease of its own, with the
// controllers' timings and switch: one replica writes the simulated nodes,
// slices and pod statuses, and the simulator does not depend on the
// controllers running (simulated nodes without controllers is a valid setup
// for driving allocation by hand).
type SimulatorConfig struct {
	// Options of the simulator; OnSeeded is set by the controller manager.
	Options simulator.Options
	// LeaseName is the simulator's Lease.
	LeaseName string
}

// simulatorState is what /readyz needs to know about the simulator.
type simulatorState struct {
	// seeded: this replica registered every simulated node and slice.
	seeded atomic.Bool
	// otherLeader: another replica runs the simulator.
	otherLeader atomic.Bool
}

// SimulatorReadyzCheck keeps /readyz failing until the simulated nodes
// exist, so that what `make run` prints is usable at once: `kubectl get
// nodes` right after the server is ready lists every node Ready. A replica
// that does not lead the simulator is ready as soon as it knows who does.
func (m *ControllerManager) SimulatorReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("simulator", func(*http.Request) error {
		if m.simulator.seeded.Load() || m.simulator.otherLeader.Load() {
			return nil
		}
		return errors.New("simulated nodes not registered yet")
	})
}

// StartSimulator starts the simulator in the background, behind its own
// Lease when leader election is on, until ctx ends or the leases are
// released. It works on the API server's own nodes and pods (core-lite).
func (m *ControllerManager) StartSimulator(ctx context.Context, loopback *rest.Config) error {
	if m.config.Simulator == nil {
		return errors.New("simulator: not configured")
	}
	qps, burst := m.simulatorClientBudget()
	kubeClient, resourceClient, err := m.clients(loopback, false, qps, burst)
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	shared, err := m.sharedInformers(loopback)
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	ctx = klog.NewContext(ctx, klog.Background().WithName("simulator"))
	stop := ctx.Done()
	nodeClients := newNodeClients(loopback, m.config.Simulator.Options.Driver)
	run := func(ctx context.Context) {
		m.runSimulator(ctx, kubeClient, resourceClient, nodeClients.get, shared, stop)
	}
	if !m.config.LeaderElection.Enabled {
		go run(ctx)
		return nil
	}
	m.leases.goRun(ctx, func(ctx context.Context) {
		runLeaderElected(ctx, kubeClient, m.config.LeaderElection, campaign{
			leaseName:          m.config.Simulator.LeaseName,
			lead:               run,
			observe:            m.simulator.otherLeader.Store,
			noLockMessage:      "Cannot run the simulator: no leader election lock",
			startedMessage:     "Became leader, starting the simulator",
			stoppedMessage:     "Stopped leading the simulator",
			otherLeaderMessage: "Another replica runs the simulator",
		})
	})
	return nil
}

// A kubelet's default client budget (upstream's kubeAPIQPS and
// kubeAPIBurst).
const (
	kubeletQPS   = 50
	kubeletBurst = 100
)

// simulatorClientBudget is the rate limit of the simulator's clients. It
// plays kubelet and driver for every simulated node, so it gets the budget
// of that many kubelets, and at least the controllers': with the
// controllers' alone, registering thousands of nodes and their slices
// waited on the client-side rate limiter.
func (m *ControllerManager) simulatorClientBudget() (float32, int) {
	nodes := m.config.Simulator.Options.Nodes
	return max(m.config.ClientQPS, kubeletQPS*float32(nodes)), max(m.config.ClientBurst, kubeletBurst*nodes)
}

// runSimulator builds the simulator and runs it until ctx ends: on the
// shared informers for this term when given (stop ends them, with the
// process), else on informers of its own term (its term of leadership is
// not the controllers').
func (m *ControllerManager) runSimulator(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	nodeClients func(string) (kubernetes.Interface, versioned.Interface), shared *Informers, stop <-chan struct{}) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	term := newTermInformers(kubeClient, resourceClient, shared, stop, true)
	defer term.end()
	opts := m.config.Simulator.Options
	opts.OnSeeded = func() { m.simulator.seeded.Store(true) }
	opts.NodeClients = nodeClients
	// The slices are cached once for the process when the informers are
	// shared.
	opts.SliceInformer = term.Resource.ResourceSlices().Informer()
	sim, err := simulator.New(logger, kubeClient, resourceClient, term.Core.Pods(), term.Resource.ResourceClaims(), opts)
	if err != nil {
		logger.Error(err, "Cannot run the simulator")
		return
	}
	term.start(ctx)
	sim.Run(ctx, m.config.Workers)
}

// nodeClients are the clients of the simulated nodes, each with its own
// node identity, made when a node first needs them. In the process
// nothing is dialed, so no certificate can be shown: the loopback client
// impersonates the node (user draplane:node:<node>, groups draplane:nodes
// and draplane:driver:<driver>), and the server authorizes and admits
// each request as that node, which auth/node restricts to its own
// objects. Each node gets a kubelet's client budget.
type nodeClients struct {
	loopback *rest.Config
	driver   string

	mu      sync.Mutex
	clients map[string]nodeClientPair
}

type nodeClientPair struct {
	kube     kubernetes.Interface
	resource versioned.Interface
}

func newNodeClients(loopback *rest.Config, driver string) *nodeClients {
	if driver == "" {
		driver = simulator.DefaultDriver
	}
	return &nodeClients{loopback: loopback, driver: driver, clients: map[string]nodeClientPair{}}
}

// get returns the node's clients. Building them fails only for a
// malformed config, which a copy of the loopback's is not.
func (c *nodeClients) get(node string) (kubernetes.Interface, versioned.Interface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pair, ok := c.clients[node]; ok {
		return pair.kube, pair.resource
	}
	config := InProcessConfig(c.loopback)
	config.QPS, config.Burst = kubeletQPS, kubeletBurst
	config.Impersonate = rest.ImpersonationConfig{
		UserName: rbac.NodeUserPrefix + node,
		Groups:   []string{rbac.NodesGroup, rbac.DriverGroupPrefix + c.driver},
	}
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		panic(fmt.Sprintf("client of simulated node %s: %v", node, err))
	}
	core, err := corev1client.NewForConfigAndClient(config, httpClient)
	if err != nil {
		panic(fmt.Sprintf("client of simulated node %s: %v", node, err))
	}
	// The node's two clients (its kubelet's and its driver's) share one
	// HTTP client, each with a budget of its own.
	resource, err := resourcev1client.NewForConfigAndClient(rest.CopyConfig(config), httpClient)
	if err != nil {
		panic(fmt.Sprintf("client of simulated node %s: %v", node, err))
	}
	pair := nodeClientPair{kube: coreOnly{core: core}, resource: resourceV1Only{v1: resource}}
	c.clients[node] = pair
	return pair.kube, pair.resource
}

// coreOnly is a simulated node's kube client. A node's identity reads
// and writes only core/v1 (its Node, its pods' status), so only that
// group's client is built: a whole clientset builds some fifty, which
// add up over hundreds of nodes. Another group's client is nil.
type coreOnly struct {
	kubernetes.Interface
	core corev1client.CoreV1Interface
}

func (c coreOnly) CoreV1() corev1client.CoreV1Interface { return c.core }

// resourceV1Only is a simulated node's resource client: the node agent
// and the driver's publisher use resource.draplane.dev/v1 only. The
// v1beta1 client is nil.
type resourceV1Only struct {
	versioned.Interface
	v1 resourcev1client.ResourceV1Interface
}

func (c resourceV1Only) ResourceV1() resourcev1client.ResourceV1Interface { return c.v1 }
