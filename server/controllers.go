package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/pflag"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/controllers/allocation"
	"github.com/draplane/draplane/controllers/devicetainteviction"
	"github.com/draplane/draplane/controllers/podclaims"
	"github.com/draplane/draplane/controllers/podtermination"
	"github.com/draplane/draplane/controllers/resourceclaim"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// ControllerOptions say whether and how the in-process controllers run.
type ControllerOptions struct {
	// Run turns the controllers on.
	Run bool
	// LeaderElect makes replicas on one etcd share the work: only the
	// holder of the lease runs controllers.
	LeaderElect   bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// LeaseNamespace and LeaseName name the coordination.k8s.io Lease.
	LeaseNamespace string
	LeaseName      string
	// Workers per controller.
	Workers int
	// EvictionsPerSecond bounds device taint evictions over the whole
	// control plane.
	EvictionsPerSecond float64
	// ClientQPS and ClientBurst bound the controllers' loopback client.
	ClientQPS   float32
	ClientBurst int

	// host, set by the server in aggregated mode, is the cluster whose
	// pods, nodes, events and leases the controllers use; nil means our
	// own core-lite through the loopback client.
	host *rest.Config
	// podMode, set by the server, is how the controllers write into pods.
	podMode podclaims.Mode

	// leases, set by the server, hands the leases back on shutdown.
	leases *leaseHolders
}

// NewControllerOptions returns the defaults: controllers on, behind leader
// election with the timings of kube-controller-manager.
func NewControllerOptions() *ControllerOptions {
	return &ControllerOptions{
		Run:                true,
		LeaderElect:        true,
		LeaseDuration:      15 * time.Second,
		RenewDeadline:      10 * time.Second,
		RetryPeriod:        2 * time.Second,
		LeaseNamespace:     "kube-system",
		LeaseName:          "draplane-controllers",
		Workers:            4,
		EvictionsPerSecond: devicetainteviction.DefaultEvictionsPerSecond,
		ClientQPS:          500,
		ClientBurst:        1000,
	}
}

// AddFlags adds the controller flags.
func (o *ControllerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Run, "controllers", o.Run, "Run the in-process controllers (claims from templates, allocation and placement, device taint eviction).")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run the controllers only while holding the leader lease, so several replicas can share one etcd.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a non-leader waits after the last renewal before taking over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps trying to renew before it gives up leading.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often candidates try to acquire or renew the lease.")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-resource-namespace", o.LeaseNamespace, "Namespace of the leader election Lease.")
	fs.StringVar(&o.LeaseName, "leader-elect-resource-name", o.LeaseName, "Name of the leader election Lease.")
	fs.IntVar(&o.Workers, "controller-workers", o.Workers, "Workers per controller.")
	fs.Float64Var(&o.EvictionsPerSecond, "device-taint-evictions-per-second", o.EvictionsPerSecond, "Upper bound on pods evicted per second because of device taints.")
}

// Validate checks the controller options.
func (o *ControllerOptions) Validate() []error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--controller-workers must be at least 1, got %d", o.Workers))
	}
	if o.LeaderElect && !(o.RetryPeriod > 0 && o.RetryPeriod < o.RenewDeadline && o.RenewDeadline < o.LeaseDuration) {
		errs = append(errs, errors.New("leader election needs 0 < --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration"))
	}
	if o.EvictionsPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("--device-taint-evictions-per-second must be positive, got %v", o.EvictionsPerSecond))
	}
	return errs
}

// startControllers is the post-start hook that runs the controllers
// against this server through the loopback connection.
func (o *ControllerOptions) startControllers(hook genericapiserver.PostStartHookContext) error {
	config := rest.CopyConfig(hook.LoopbackClientConfig)
	config.QPS, config.Burst = o.ClientQPS, o.ClientBurst
	kubeConfig := config
	if o.host != nil {
		kubeConfig = rest.CopyConfig(o.host)
		kubeConfig.QPS, kubeConfig.Burst = o.ClientQPS, o.ClientBurst
	}
	kubeClient, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return fmt.Errorf("controllers: kube client: %w", err)
	}
	resourceClient, err := versioned.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("controllers: resource client: %w", err)
	}
	ctx := klog.NewContext(hook, klog.Background().WithName("controllers"))
	if !o.LeaderElect {
		go func() {
			if err := runControllers(ctx, kubeClient, resourceClient, o); err != nil {
				klog.FromContext(ctx).Error(err, "Controllers stopped")
			}
		}()
		return nil
	}
	o.leases.goRun(ctx, func(ctx context.Context) { o.leadAndRun(ctx, kubeClient, resourceClient) })
	return nil
}

// leadAndRun campaigns for the lease until the server stops. Losing the
// lease stops the controllers; the replica then campaigns again with
// fresh controllers and informers, so it can take over later.
func (o *ControllerOptions) leadAndRun(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface) {
	logger := klog.FromContext(ctx)
	hostname, _ := os.Hostname()
	identity := hostname + "_" + uuid.NewString()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.LeaseNamespace, o.LeaseName,
		nil, kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		logger.Error(err, "Cannot run controllers: no leader election lock")
		return
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   o.LeaseDuration,
			RenewDeadline:   o.RenewDeadline,
			RetryPeriod:     o.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            o.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leaderCtx context.Context) {
					logger.Info("Became leader, starting controllers", "identity", identity)
					if err := runControllers(leaderCtx, kubeClient, resourceClient, o); err != nil {
						logger.Error(err, "Controllers stopped")
					}
				},
				OnStoppedLeading: func() {
					logger.Info("Stopped leading", "identity", identity)
				},
				OnNewLeader: func(current string) {
					if current != identity {
						logger.Info("Another replica leads the controllers", "leader", current)
					}
				},
			},
		})
	}
}

// runControllers builds every controller with informers of its own and
// runs them until ctx ends. Controllers cannot be restarted, so each term
// of leadership gets new ones.
func runControllers(ctx context.Context, kubeClient kubernetes.Interface, resourceClient versioned.Interface, o *ControllerOptions) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	pods := kubeInformers.Core().V1().Pods()
	nodes := kubeInformers.Core().V1().Nodes()
	claims := resourceInformers.Resource().V1().ResourceClaims()
	templates := resourceInformers.Resource().V1().ResourceClaimTemplates()
	classes := resourceInformers.Resource().V1().DeviceClasses()
	slices := resourceInformers.Resource().V1().ResourceSlices()
	taintRules := resourceInformers.Resource().V1().DeviceTaintRules()

	claimController, err := resourceclaim.NewControllerWithOptions(logger.WithName("resourceclaim"), kubeClient, resourceClient, pods, claims, templates,
		resourceclaim.Options{Mode: o.podMode})
	if err != nil {
		return fmt.Errorf("resource claim controller: %w", err)
	}
	allocationController, err := allocation.NewController(logger.WithName("allocation"), kubeClient, resourceClient,
		pods, nodes, claims, classes, slices, taintRules, allocation.Options{Mode: o.podMode})
	if err != nil {
		return fmt.Errorf("allocation controller: %w", err)
	}
	evictionController, err := devicetainteviction.NewController(logger.WithName("devicetainteviction"), kubeClient, resourceClient,
		pods, claims, slices, taintRules, devicetainteviction.Options{EvictionsPerSecond: o.EvictionsPerSecond})
	if err != nil {
		return fmt.Errorf("device taint eviction controller: %w", err)
	}
	// A host cluster's kubelets finish their pods themselves.
	var terminationController *podtermination.Controller
	if o.host == nil {
		terminationController, err = podtermination.NewController(logger.WithName("podtermination"), kubeClient, pods)
		if err != nil {
			return fmt.Errorf("pod termination controller: %w", err)
		}
	}

	kubeInformers.Start(ctx.Done())
	resourceInformers.Start(ctx.Done())
	done := make(chan struct{}, 4)
	running := 0
	run := func(name string, f func(context.Context, int)) {
		running++
		go func() {
			defer func() { done <- struct{}{} }()
			f(klog.NewContext(ctx, logger.WithName(name)), o.Workers)
		}()
	}
	run("resourceclaim", claimController.Run)
	run("allocation", allocationController.Run)
	run("devicetainteviction", evictionController.Run)
	if terminationController != nil {
		run("podtermination", terminationController.Run)
	}
	<-ctx.Done()
	for range running {
		<-done
	}
	kubeInformers.Shutdown()
	resourceInformers.Shutdown()
	return nil
}
