// Package controllermanager runs the in-process controllers and the
// simulator against the API server: it builds the controllers on one
// shared informer factory per client, and runs them, and the simulator,
// behind leader election when replicas share an etcd. Core-lite's
// controllers, which run on every replica, start from here too
// (Controller, AddEveryReplica).
package controllermanager

import (
	"context"
	"fmt"
	"slices"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corev1informers "k8s.io/client-go/informers/core/v1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/generated/clientset/versioned"
	resourcev1informers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	"github.com/draplane/draplane/internal/controllers/allocation"
	"github.com/draplane/draplane/internal/controllers/devicetainteviction"
	"github.com/draplane/draplane/internal/controllers/podgc"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/controllers/podtermination"
	"github.com/draplane/draplane/internal/controllers/resourceclaim"
	"github.com/draplane/draplane/internal/controllers/staleslices"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/inprocess"
	"github.com/draplane/draplane/internal/resourceclient"
)

// Config is what the controller manager runs and how.
type Config struct {
	// Controllers turns the controllers on: claims from templates,
	// allocation and placement, device taint eviction and, without a host
	// cluster, pod termination.
	Controllers bool
	// Workers per controller (and of the simulator).
	Workers int
	// EvictionsPerSecond bounds device taint evictions over the whole
	// control plane.
	EvictionsPerSecond float64
	// BindingTimeout is how long a pod waits for the binding conditions
	// of its devices; allocation.DefaultBindingTimeout when zero.
	BindingTimeout time.Duration
	// GangBudget and GangGreedy: see allocation.Options.
	GangBudget int
	GangGreedy bool
	// ClientQPS and ClientBurst bound every client the controller manager
	// makes.
	ClientQPS   float32
	ClientBurst int
	// LeaderElection guards the controllers and the simulator, each with
	// a Lease of its own.
	LeaderElection LeaderElectionConfig
	// LeaseName is the controllers' Lease.
	LeaseName string
	// Host, in aggregated mode, is the cluster whose pods, nodes, events
	// and leases the controllers use; nil means the API server's own
	// core-lite through its loopback client.
	Host *rest.Config
	// PodMode is how the controllers read claims from pods and place them.
	PodMode podmode.Mode
	// OwnerTaintKey marks the devices the controllers place in cluster
	// mode (podmode.Cluster): see allocation.Options.OwnerTaintKey.
	OwnerTaintKey string
	// Simulator, when set, runs the simulator.
	Simulator *SimulatorConfig
}

// ControllerManager runs what its Config asks for and keeps track of the
// work that holds Leases, to hand them back on shutdown.
type ControllerManager struct {
	config    Config
	leases    leaseHolders
	simulator simulatorState
	// shared, when set, gives the controllers and the simulator the
	// process's informers while they are not leader-elected.
	shared *inprocess.SharedInformers
	// everyReplica are the controllers that are not leader-elected.
	everyReplica []Controller
}

// New returns a controller manager for config; nothing runs before Start*.
func New(config Config) *ControllerManager {
	return &ControllerManager{config: config}
}

// UseSharedInformers makes the controllers and the simulator watch
// through the informers of shared (those of the resourcepools view too)
// instead of informers of their own. Call it before Start*.
func (m *ControllerManager) UseSharedInformers(shared *inprocess.SharedInformers) { m.shared = shared }

// sharedInformers returns the process's informers, if it has any.
func (m *ControllerManager) sharedInformers(loopback *rest.Config) (*inprocess.Informers, error) {
	if m.shared == nil {
		return nil, nil
	}
	return m.shared.Get(loopback)
}

// clients returns the clients of the controller manager: resource.draplane.dev
// through loopback, pods, nodes, events and leases through the host when
// there is one. Each makes at most qps requests per second, with bursts.
func (m *ControllerManager) clients(loopback *rest.Config, useHost bool, qps float32, burst int) (kubernetes.Interface, versioned.Interface, error) {
	config := inprocess.InProcessConfig(loopback)
	config.QPS, config.Burst = qps, burst
	kubeConfig := inprocess.InProcessConfig(loopback)
	kubeConfig.QPS, kubeConfig.Burst = qps, burst
	if useHost && m.config.Host != nil {
		kubeConfig = rest.CopyConfig(m.config.Host)
		kubeConfig.QPS, kubeConfig.Burst = qps, burst
	}
	kubeClient, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kube client: %w", err)
	}
	if useHost && m.clusterMode() {
		// The host's resource.k8s.io/v1, as our types.
		resourceClient, err := resourceclient.NewForConfig(kubeConfig)
		if err != nil {
			return nil, nil, fmt.Errorf("host resource client: %w", err)
		}
		return kubeClient, resourceClient, nil
	}
	resourceClient, err := versioned.NewForConfig(config)
	if err != nil {
		return nil, nil, fmt.Errorf("resource client: %w", err)
	}
	return kubeClient, resourceClient, nil
}

// StartControllers starts the controllers in the background, behind the
// controllers' Lease when leader election is on, until ctx ends or the
// leases are released.
func (m *ControllerManager) StartControllers(ctx context.Context, loopback *rest.Config) error {
	kubeClient, resourceClient, err := m.clients(loopback, true, m.config.ClientQPS, m.config.ClientBurst)
	if err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	shared, err := m.sharedInformers(loopback)
	if err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	ctx = klog.NewContext(ctx, klog.Background().WithName("controllers"))
	stop := ctx.Done()
	run := func(ctx context.Context) {
		if err := m.runControllers(ctx, kubeClient, resourceClient, shared, stop); err != nil {
			klog.FromContext(ctx).Error(err, "Controllers stopped")
		}
	}
	if !m.config.LeaderElection.Enabled {
		go run(ctx)
		return nil
	}
	m.leases.goRun(ctx, func(ctx context.Context) {
		runLeaderElected(ctx, kubeClient, m.config.LeaderElection, campaign{
			leaseName:          m.config.LeaseName,
			lead:               run,
			noLockMessage:      "Cannot run controllers: no leader election lock",
			startedMessage:     "Became leader, starting controllers",
			stoppedMessage:     "Stopped leading",
			otherLeaderMessage: "Another replica leads the controllers",
		})
	})
	return nil
}

// ReleaseLeases stops the leader-elected work and waits, at most timeout,
// until it has handed its Leases back. The API server calls it before it
// stops serving, while the Lease updates still reach it.
func (m *ControllerManager) ReleaseLeases(timeout time.Duration) {
	m.leases.release(timeout)
}

// runControllers builds every controller and runs them until ctx ends.
// Controllers cannot be restarted, so each term of leadership gets new
// ones. With shared informers they watch through those, for this term
// (stop ends the informers, with the process); otherwise, and for a host
// cluster's pods, nodes and namespaces, on informers of the term.
func (m *ControllerManager) runControllers(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	shared *inprocess.Informers, stop <-chan struct{}) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	// core/v1 from the shared informers where they watch the cluster the
	// pods are in: this server's core-lite, or the host in cluster mode.
	term := inprocess.NewTermInformers(kubeClient, resourceClient, shared, stop, m.config.Host == nil || m.shared != nil && m.shared.OnHost())
	defer term.End()
	podGroups := m.podGroups(logger, kubeClient, term)
	controllers, err := m.newControllers(logger, kubeClient, resourceClient, term.Core, term.Resource, podGroups)
	if err != nil {
		return err
	}

	term.Start(ctx)
	done := make(chan struct{}, len(controllers))
	for _, c := range controllers {
		go func() {
			defer func() { done <- struct{}{} }()
			c.run(klog.NewContext(ctx, logger.WithName(c.name)), m.config.Workers)
		}()
	}
	<-ctx.Done()
	for range controllers {
		<-done
	}
	return nil
}

// podGroups returns the PodGroup informer gang placement watches, or nil:
// with the GenericWorkload gate, core-lite's PodGroups standalone, the
// host cluster's in aggregated mode where the host serves them. A host
// that does not is said so, once per term.
func (m *ControllerManager) podGroups(logger klog.Logger, kubeClient kubernetes.Interface, term *inprocess.TermInformers) schedulinginformers.PodGroupInformer {
	if !features.Enabled(features.GenericWorkload) {
		return nil
	}
	if m.config.Host != nil {
		resources, err := kubeClient.Discovery().ServerResourcesForGroupVersion(schedulingv1beta1.SchemeGroupVersion.String())
		if err != nil || !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "podgroups" }) {
			logger.Info("The host cluster does not serve scheduling.k8s.io/v1beta1 PodGroups: pods' spec.schedulingGroup is ignored, gangs are not placed as a whole", "err", err)
			return nil
		}
		logger.Info("Placing gangs of the host cluster's PodGroups")
	}
	return term.Own.Kube.Scheduling().V1beta1().PodGroups()
}

// clusterMode says whether the controllers place a host cluster's own
// pods with its resource.k8s.io claims (podmode.Cluster).
func (m *ControllerManager) clusterMode() bool {
	_, ok := m.config.PodMode.(podmode.Cluster)
	return ok && m.config.Host != nil
}

// newClusterControllers builds what runs in cluster mode: the allocation
// controller, and the resource claim controller only for the claims of
// extended resources, on the host's objects. The host's
// kube-controller-manager generates claims from templates, releases the
// claims of pods that are done and evicts for device taints; its kubelets
// finish pods and its garbage collectors remove what deleted nodes leave.
func (m *ControllerManager) newClusterControllers(logger klog.Logger, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	core corev1informers.Interface, resource resourcev1informers.Interface, podGroups schedulinginformers.PodGroupInformer) ([]Controller, error) {
	// DeviceTaintRules are resource.k8s.io/v1 from Kubernetes 1.37 on; an
	// informer of a resource the host does not serve would never sync.
	taintRules := resource.DeviceTaintRules()
	served, err := kubeClient.Discovery().ServerResourcesForGroupVersion(resourceclient.UpstreamGroupVersion.String())
	if err != nil || !slices.ContainsFunc(served.APIResources, func(r metav1.APIResource) bool { return r.Name == "devicetaintrules" }) {
		logger.Info("The host cluster does not serve resource.k8s.io/v1 DeviceTaintRules: they taint no device", "err", err)
		taintRules = nil
	}
	// Extended resources backed by devices: kube-scheduler makes their
	// claim for the pods it places, so here the claim for ours is made
	// by the resource claim controller limited to that.
	extendedResources := features.Enabled(features.DRAExtendedResource)
	allocationController, err := allocation.NewController(logger.WithName("allocation"), kubeClient, resourceClient,
		core.Pods(), core.Nodes(), resource.ResourceClaims(), resource.DeviceClasses(), resource.ResourceSlices(), taintRules,
		allocation.Options{Mode: m.config.PodMode, Namespaces: core.Namespaces(), ExtendedResources: extendedResources,
			BindingTimeout: m.config.BindingTimeout, PodGroups: podGroups,
			GangBudget: m.config.GangBudget, GangGreedy: m.config.GangGreedy,
			FitNodeResources: true, Finalizer: podmode.UpstreamFinalizer, OwnerTaintKey: m.config.OwnerTaintKey})
	if err != nil {
		return nil, fmt.Errorf("allocation controller: %w", err)
	}
	controllers := []Controller{{name: "allocation", run: allocationController.Run}}
	if extendedResources {
		claimController, err := resourceclaim.NewControllerWithOptions(logger.WithName("resourceclaim"), kubeClient, resourceClient,
			core.Pods(), resource.ResourceClaims(), nil,
			resourceclaim.Options{Mode: m.config.PodMode, Classes: resource.DeviceClasses(), ExtendedResourcesOnly: true})
		if err != nil {
			return nil, fmt.Errorf("resource claim controller: %w", err)
		}
		controllers = append(controllers, Controller{name: "resourceclaim", run: claimController.Run})
	}
	return controllers, nil
}

// newControllers builds the leader-elected controllers; each asks the
// factories for the informers it needs before they start.
func (m *ControllerManager) newControllers(logger klog.Logger, kubeClient kubernetes.Interface, resourceClient versioned.Interface,
	core corev1informers.Interface, resource resourcev1informers.Interface, podGroups schedulinginformers.PodGroupInformer) ([]Controller, error) {
	pods := core.Pods()
	nodes := core.Nodes()
	claims := resource.ResourceClaims()
	templates := resource.ResourceClaimTemplates()
	classes := resource.DeviceClasses()
	slices := resource.ResourceSlices()
	taintRules := resource.DeviceTaintRules()
	// The admin access label lives on the namespaces of the pods' cluster.
	namespaces := core.Namespaces()

	if m.clusterMode() {
		return m.newClusterControllers(logger, kubeClient, resourceClient, core, resource, podGroups)
	}
	claimOptions := resourceclaim.Options{Mode: m.config.PodMode, Namespaces: namespaces, PodGroups: podGroups}
	// Extended resources backed by devices get their claims here only
	// for our own pods: a host cluster's scheduler does that for its pods
	// with its own classes.
	extendedResources := podmode.OrStandalone(m.config.PodMode) == podmode.Standalone && features.Enabled(features.DRAExtendedResource)
	if extendedResources {
		claimOptions.Classes = classes
	}
	claimController, err := resourceclaim.NewControllerWithOptions(logger.WithName("resourceclaim"), kubeClient, resourceClient, pods, claims, templates, claimOptions)
	if err != nil {
		return nil, fmt.Errorf("resource claim controller: %w", err)
	}
	allocationController, err := allocation.NewController(logger.WithName("allocation"), kubeClient, resourceClient,
		pods, nodes, claims, classes, slices, taintRules, allocation.Options{Mode: m.config.PodMode, Namespaces: namespaces, ExtendedResources: extendedResources,
			BindingTimeout: m.config.BindingTimeout, PodGroups: podGroups,
			GangBudget: m.config.GangBudget, GangGreedy: m.config.GangGreedy})
	if err != nil {
		return nil, fmt.Errorf("allocation controller: %w", err)
	}
	controllers := []Controller{
		{name: "resourceclaim", run: claimController.Run},
		{name: "allocation", run: allocationController.Run},
	}
	// As upstream's controller manager, no taint evicts while device
	// taints are off.
	if features.Enabled(features.DRADeviceTaints) {
		evictionController, err := devicetainteviction.NewController(logger.WithName("devicetainteviction"), kubeClient, resourceClient,
			pods, claims, slices, taintRules, devicetainteviction.Options{EvictionsPerSecond: m.config.EvictionsPerSecond})
		if err != nil {
			return nil, fmt.Errorf("device taint eviction controller: %w", err)
		}
		controllers = append(controllers, Controller{name: "devicetainteviction", run: evictionController.Run})
	}
	// A host cluster's kubelets finish their pods themselves.
	if m.config.Host == nil {
		terminationController, err := podtermination.NewController(logger.WithName("podtermination"), kubeClient, pods)
		if err != nil {
			return nil, fmt.Errorf("pod termination controller: %w", err)
		}
		controllers = append(controllers, Controller{name: "podtermination", run: terminationController.Run})
		// A host cluster's garbage collector removes slices owned by a
		// deleted Node; standalone has none.
		staleSlicesController, err := staleslices.NewController(logger.WithName("staleslices"), kubeClient, resourceClient, nodes, slices)
		if err != nil {
			return nil, fmt.Errorf("stale slices controller: %w", err)
		}
		controllers = append(controllers, Controller{name: "staleslices", run: staleSlicesController.Run})
		// A host cluster's pod garbage collector removes the pods of a
		// deleted Node; standalone has none.
		podGCController, err := podgc.NewController(logger.WithName("podgc"), kubeClient, pods, nodes)
		if err != nil {
			return nil, fmt.Errorf("pod garbage collector: %w", err)
		}
		controllers = append(controllers, Controller{name: "podgc", run: podGCController.Run})
	}
	return controllers, nil
}
