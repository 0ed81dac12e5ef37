package inprocess

import (
	"context"
	"fmt"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
	"github.com/draplane/draplane/internal/auth/nodetoken"
	"github.com/draplane/draplane/internal/auth/rbac"
	"github.com/draplane/draplane/internal/simulator"
)

// KubeletQPS and KubeletBurst are a kubelet's default client budget
// (upstream's kubeAPIQPS and kubeAPIBurst): each simulated node's.
const (
	KubeletQPS   = 50
	KubeletBurst = 100
)

// RunSimulator builds the simulator and runs it until ctx ends: on the
// shared informers for this term when given (stop ends them, with the
// process), else on informers of its own term (its term of leadership is
// not the controllers'). opts carries the node clients and what to call
// once the nodes are seeded.
func RunSimulator(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	opts simulator.Options, workers int, shared *Informers, stop <-chan struct{}) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	term := NewTermInformers(kubeClient, resourceClient, shared, stop, true)
	defer term.End()
	// The slices are cached once for the process when the informers are
	// shared.
	opts.SliceInformer = term.Resource.ResourceSlices().Informer()
	sim, err := simulator.New(logger, kubeClient, resourceClient, term.Core.Pods(), term.Resource.ResourceClaims(), opts)
	if err != nil {
		logger.Error(err, "Cannot run the simulator")
		return
	}
	term.Start(ctx)
	sim.Run(ctx, workers)
}

// NodeClients are the clients of the simulated nodes, each with its own
// node identity, made when a node first needs them. In the process
// nothing is dialed, so no certificate can be shown: each node's client
// sends a bearer token of its identity (user draplane:node:<node>, groups
// draplane:nodes and draplane:driver:<driver>) minted from the loopback
// token (auth/nodetoken), which the server authenticates as the node; a
// loopback config without a token impersonates the node instead. The
// server authorizes and admits each request as that node, which
// auth/node restricts to its own objects. Each node gets a kubelet's
// client budget.
type NodeClients struct {
	loopback *rest.Config
	driver   string

	mu      sync.Mutex
	clients map[string]nodeClientPair
}

type nodeClientPair struct {
	kube     kubernetes.Interface
	resource versioned.Interface
}

// NewNodeClients returns the clients of the simulated nodes of driver
// (simulator.DefaultDriver when empty).
func NewNodeClients(loopback *rest.Config, driver string) *NodeClients {
	if driver == "" {
		driver = simulator.DefaultDriver
	}
	return &NodeClients{loopback: loopback, driver: driver, clients: map[string]nodeClientPair{}}
}

// Get returns the node's clients. Building them fails only for a
// malformed config, which a copy of the loopback's is not.
func (c *NodeClients) Get(node string) (kubernetes.Interface, versioned.Interface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pair, ok := c.clients[node]; ok {
		return pair.kube, pair.resource
	}
	config := InProcessConfig(c.loopback)
	config.QPS, config.Burst = KubeletQPS, KubeletBurst
	if token := nodetoken.Token(c.loopback.BearerToken, node, c.driver); token != "" {
		config.BearerToken, config.BearerTokenFile = token, ""
	} else {
		config.Impersonate = rest.ImpersonationConfig{
			UserName: rbac.NodeUserPrefix + node,
			Groups:   rbac.NodeGroups(c.driver),
		}
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
