package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/driver/grpcplugin"
	"github.com/draplane/draplane/driver/nodeagent"
	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/internal/resourceclient"
	"github.com/draplane/draplane/internal/server/pki"
)

// DefaultPluginRegistrationDir is where the kubelet looks for the
// registration sockets of its plugins.
const DefaultPluginRegistrationDir = "/var/lib/kubelet/plugins_registry"

// nodeAgentName is the node agent in events, field managers and logs.
const nodeAgentName = "dra-node-agent"

// NodeAgentOptions are the flags of `dra-apiserver node-agent`.
type NodeAgentOptions struct {
	Kubeconfig      string
	DataDir         string
	Drivers         []string
	NodeName        string
	RegistrationDir string
	Checkpoint      string
	Workers         int
	// ResourceAPI is the group the node's claims are read from:
	// resource.draplane.dev, resource.k8s.io, or "" for the first the
	// server serves.
	ResourceAPI string
	// Allocatable is what the node reports it has, as "<resource>=<quantity>".
	Allocatable map[string]string
	// DeregistrationGracePeriod is how long a driver may have no plugin
	// before the node's slices of it are removed.
	DeregistrationGracePeriod time.Duration
	Logs                      *logsapi.LoggingConfiguration
}

// newNodeAgentCommand is `dra-apiserver node-agent`: the kubelet's DRA part
// for one node, for any DRA driver's unmodified kubelet plugin.
func newNodeAgentCommand() *cobra.Command {
	o := &NodeAgentOptions{RegistrationDir: DefaultPluginRegistrationDir, Workers: 2,
		DeregistrationGracePeriod: nodeagent.DefaultDeregistrationGracePeriod, Logs: logsapi.NewLoggingConfiguration()}
	cmd := &cobra.Command{
		Use:   "node-agent",
		Short: "Play a node's kubelet for DRA kubelet plugins",
		Long: `node-agent plays the kubelet's part in Dynamic Resource Allocation for one
node, with no kubelet: DRA kubelet plugins (drivers built on
k8s.io/dynamic-resource-allocation/kubeletplugin, or any that speak the
kubelet's plugin registration and DRA gRPC API) register with it through
their socket in --plugin-registration-dir, publish their ResourceSlices to
the dra-apiserver, and get NodePrepareResources and NodeUnprepareResources
calls for the pods bound to the node. It registers the Node and keeps it
Ready, marks a pod Running once every claim is prepared, shows the CDI
device IDs each prepare returned in a PreparedDynamicResources event, and
the health the plugins report in the pods' allocatedResourcesStatus. It
runs as the node (user draplane:node:<node>), which the server restricts
to the node's objects, and gets the claims of its pods by name.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := logsapi.ValidateAndApply(o.Logs, nil); err != nil {
				return err
			}
			if err := o.complete(); err != nil {
				return err
			}
			ctx := genericapiserver.SetupSignalContext()
			logger := klog.Background().WithValues("node", o.NodeName)
			ctx = klog.NewContext(ctx, logger)
			return o.run(ctx)
		},
	}
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("node agent")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the dra-apiserver, with the node's identity (default: one signed for user draplane:node:<node> in group draplane:nodes by the CA of --data-dir, written to node-agent/<node>/kubeconfig there)")
	fs.StringVar(&o.DataDir, "data-dir", "", "data directory of a standalone server on this machine, whose CA signs the node's identity when --kubeconfig is not given (default: the server's default data dir)")
	fs.StringSliceVar(&o.Drivers, "driver", nil, "driver name, repeatable: the node's identity gets the group draplane:driver:<driver>, so that its clean start may remove that driver's slices of the node (without --kubeconfig)")
	fs.StringVar(&o.NodeName, "node-name", "", "the node to play kubelet for; registered if it does not exist (required)")
	fs.StringVar(&o.RegistrationDir, "plugin-registration-dir", o.RegistrationDir, "where kubelet plugins put their registration sockets (the kubelet's <root>/plugins_registry)")
	fs.StringVar(&o.Checkpoint, "checkpoint", "", "file recording the prepared claims, so that a restarted agent unprepares the claims of pods deleted meanwhile and prepares nothing twice (default: node-agent/<node>/checkpoint.json in the default data dir)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "pods handled at once")
	fs.StringVar(&o.ResourceAPI, "resource-api", o.ResourceAPI, "API group of the claims the node prepares: resource.draplane.dev (a dra-apiserver's own), resource.k8s.io (any kube-apiserver's, for example a cluster whose pods draplane or kube-scheduler places; the agent then also removes its deleted pods once their claims are unprepared, as a kubelet does), or empty for resource.draplane.dev where the server serves it, else resource.k8s.io")
	fs.StringToStringVar(&o.Allocatable, "allocatable", nil, "capacity and allocatable the node reports, for schedulers that check pods' requests, for example cpu=8,memory=32Gi,pods=110 (default: the machine's cpus and memory, 110 pods)")
	fs.DurationVar(&o.DeregistrationGracePeriod, "deregistration-grace-period", o.DeregistrationGracePeriod, "how long a driver may have no registered plugin before the node's slices of it are removed, as the kubelet does; a plugin back in time keeps its slices as they are")
	// As a kubelet's: DRAWorkloadResourceClaims (with GenericWorkload)
	// makes a claim reserved for a pod's PodGroup one of the pod's.
	utilfeature.DefaultMutableFeatureGate.AddFlag(fss.FlagSet("feature gates"))
	logFlags := fss.FlagSet("logging")
	// Logging is validated without feature gates: the logging flags that
	// need LoggingAlphaOptions or LoggingBetaOptions would only be
	// refused.
	all := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(o.Logs, all)
	all.VisitAll(func(f *pflag.Flag) {
		if !strings.HasPrefix(f.Usage, "[Alpha]") && !strings.HasPrefix(f.Usage, "[Beta]") {
			logFlags.AddFlag(f)
		}
	})
	logs.AddFlags(logFlags, logs.SkipLoggingConfigurationFlags())
	setSubcommandFlags(cmd, fss)
	return cmd
}

func (o *NodeAgentOptions) complete() error {
	if o.NodeName == "" {
		return errors.New("--node-name is required")
	}
	if o.DeregistrationGracePeriod <= 0 {
		return errors.New("--deregistration-grace-period must be positive")
	}
	if o.Kubeconfig != "" && o.Checkpoint != "" {
		return nil
	}
	dir := o.DataDir
	if dir == "" {
		var err error
		if dir, err = DefaultDataDir(); err != nil {
			return err
		}
	}
	if o.Checkpoint == "" {
		o.Checkpoint = filepath.Join(dir, "node-agent", o.NodeName, "checkpoint.json")
	}
	if o.Kubeconfig == "" {
		// The node's own identity, never the admin's: the server
		// restricts it to the node's objects (auth/node).
		o.Kubeconfig = filepath.Join(dir, "node-agent", o.NodeName, "kubeconfig")
		if err := os.MkdirAll(filepath.Dir(o.Kubeconfig), 0o700); err != nil {
			return err
		}
		if err := pki.MintClientKubeconfig(pki.NodeKubeconfig(dir, o.NodeName, o.Drivers, o.Kubeconfig)); err != nil {
			return fmt.Errorf("node identity: %w", err)
		}
	}
	return nil
}

func (o *NodeAgentOptions) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	resourceClient, upstreamAPI, err := o.resourceClient(logger, kubeClient, config)
	if err != nil {
		return err
	}
	allocatable, err := o.allocatable()
	if err != nil {
		return err
	}
	// A kubelet's clean start: the node's slices of every driver go; the
	// plugins publish theirs again when they register.
	if _, err := driver.RemoveNodeSlices(ctx, resourceClient, o.NodeName); err != nil {
		return err
	}
	if _, err := nodeagent.RegisterNode(ctx, kubeClient, o.NodeName, nodeAgentName); err != nil {
		return err
	}
	if err := nodeagent.SetAllocatable(ctx, kubeClient, o.NodeName, nodeAgentName, allocatable); err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTweakListOptions(func(opts *metav1.ListOptions) {
		opts.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
	}))
	// The agent exists before the registry runs; the callbacks only run
	// once the registry does.
	var agent *nodeagent.Agent
	var registry *grpcplugin.Registry
	remover := nodeagent.NewSliceRemover(resourceClient, o.NodeName, o.DeregistrationGracePeriod, nil)
	defer remover.Wait()
	registry = grpcplugin.New(grpcplugin.Options{
		Dir: o.RegistrationDir,
		OnChange: func(e grpcplugin.Event) {
			logger.Info("Kubelet plugin", "driver", e.DriverName, "registered", e.Registered, "service", e.Service, "endpoint", e.Endpoint)
			if e.Registered {
				remover.Back(e.DriverName)
				// Pods that waited for the driver may start now.
				agent.Resync()
				return
			}
			if !slices.ContainsFunc(registry.Plugins(), func(p grpcplugin.Plugin) bool { return p.DriverName == e.DriverName }) {
				remover.Gone(ctx, e.DriverName)
			}
		},
		OnHealth: func(u grpcplugin.HealthUpdate) {
			devices := make([]nodeagent.DeviceHealth, 0, len(u.Devices))
			for _, d := range u.Devices {
				devices = append(devices, nodeagent.DeviceHealth{Pool: d.Pool, Device: d.Device, Health: corev1.ResourceHealthStatus(d.Health)})
			}
			agent.SetDeviceHealth(u.DriverName, devices)
		},
	})
	claims := nodeagent.ClaimsFromClient(func(string) versioned.Interface { return resourceClient })
	agent, err = nodeagent.New(logger, kubeClient, factory.Core().V1().Pods(), claims, nodeagent.Options{
		Name:       nodeAgentName,
		Nodes:      []string{o.NodeName},
		Drivers:    registry,
		Checkpoint: o.Checkpoint,
		// A kube-apiserver has no pod termination controller: the agent
		// removes its deleted pods, as a kubelet does.
		FinishDeletions: upstreamAPI,
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	registryDone := make(chan error, 1)
	go func() { registryDone <- registry.Run(ctx) }()
	go nodeagent.KeepReady(ctx, kubeClient, o.NodeName, nodeAgentName, time.Minute)
	logger.Info("Node agent running", "pluginRegistrationDir", o.RegistrationDir, "checkpoint", o.Checkpoint)
	agent.Run(ctx, o.Workers)
	if err := <-registryDone; err != nil && ctx.Err() == nil {
		return fmt.Errorf("plugin registration: %w", err)
	}
	return nil
}

// resourceClient reads the claims from the group --resource-api names,
// and says whether that is upstream's.
func (o *NodeAgentOptions) resourceClient(logger klog.Logger, kubeClient kubernetes.Interface, config *rest.Config) (versioned.Interface, bool, error) {
	group := o.ResourceAPI
	if group == "" {
		group = resourceclient.UpstreamGroupVersion.Group
		if _, err := kubeClient.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String()); err == nil {
			group = resourcev1.GroupName
		}
	}
	logger.Info("Reading claims", "apiGroup", group)
	switch group {
	case resourcev1.GroupName:
		client, err := versioned.NewForConfig(config)
		return client, false, err
	case resourceclient.UpstreamGroupVersion.Group:
		client, err := resourceclient.NewForConfig(config)
		return client, true, err
	default:
		return nil, false, fmt.Errorf("--resource-api must be %s or %s, got %q", resourcev1.GroupName, resourceclient.UpstreamGroupVersion.Group, group)
	}
}

// allocatable parses --allocatable, with the machine's cpus and memory and
// 110 pods (the kubelet's default) for what it leaves out.
func (o *NodeAgentOptions) allocatable() (corev1.ResourceList, error) {
	list := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err == nil {
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(info.Totalram)*int64(info.Unit), resource.BinarySI)
	}
	for name, value := range o.Allocatable {
		quantity, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("--allocatable %s=%s: %w", name, value, err)
		}
		list[corev1.ResourceName(name)] = quantity
	}
	return list, nil
}
