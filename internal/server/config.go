package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/controllermanager"
	"github.com/draplane/draplane/internal/registry/patcherrors"
	"github.com/draplane/draplane/internal/registry/resourceclaim"
	"github.com/draplane/draplane/internal/server/devicemap"
	"github.com/draplane/draplane/internal/server/etcdstorage"
	"github.com/draplane/draplane/internal/server/pki"
)

// Config is everything the server is built from, resolved from the
// command's options: listeners bound, certificates on disk, embedded etcd
// running.
type Config struct {
	Generic *genericapiserver.RecommendedConfig
	Extra   ExtraConfig
}

// ExtraConfig is what the generic config has no place for.
type ExtraConfig struct {
	Scheme *runtime.Scheme
	Codecs serializer.CodecFactory
	// DataDir holds the embedded etcd, the CA and the admin kubeconfig.
	DataDir string
	// KubeconfigPath is the admin kubeconfig written for this server.
	KubeconfigPath string
	// ServerURL is where clients reach the API.
	ServerURL string
	// CoreLite, when set, serves core-lite (see NewCoreLite).
	CoreLite *CoreLite
	// InProcess, when set, is where the clients inside the process send
	// their requests and find their shared informers; core-lite's
	// informers are among them. New makes one when it is not set.
	InProcess *InProcess
	// NodeRestriction, when set, is the node restriction of the
	// admission chain, whose checks of updates the stores of
	// resourceslices and resourceclaims/status run (the chain asks it
	// about creates and deletes only).
	NodeRestriction *node.Admission
	// HostNamespaces, in aggregated mode, reads the host cluster's
	// namespaces: their resource.kubernetes.io/admin-access label says
	// where admin access to devices is allowed. Without it core-lite's
	// namespaces are read; with neither, admin access is refused.
	HostNamespaces resourceclaim.NamespaceGetter
	// UpstreamResourceAPI serves resource.k8s.io/v1 over the objects of
	// resource.draplane.dev, for upstream clients and drivers. Standalone
	// only: in aggregated mode the host cluster owns that group.
	UpstreamResourceAPI bool
	// ControllerManager, when set, says what runs in-process against the
	// server: the controllers, the simulator, or both.
	ControllerManager *controllermanager.Config
	// CABundle, when set, keeps the host's APIServices' spec.caBundle
	// equal to the CA of the serving certificate (aggregated mode).
	CABundle *pki.CABundleConfig
	// Etcd is the embedded etcd, nil with external etcd servers; the
	// server stops it.
	Etcd *etcdstorage.EmbeddedEtcd
	// Lock keeps a second server off the data dir until this one stops.
	Lock *etcdstorage.DataDirLock
	// DeviceMap serves the device map page at /devicemap/ (package
	// server/devicemap).
	DeviceMap bool
}

type completedConfig struct {
	Generic genericapiserver.CompletedConfig
	Extra   *ExtraConfig
}

// CompletedConfig can build a Server; only Config.Complete makes one.
type CompletedConfig struct {
	*completedConfig
}

// Close releases what Config started when no Server takes it over.
func (c *Config) Close() {
	if c != nil {
		c.Extra.Etcd.Close()
		c.Extra.Lock.Unlock()
	}
}

// NewRecommendedConfig returns the generic server config every
// dra-apiserver starts from: the Kubernetes API level we implement, no
// priority-and-fairness (it needs the flowcontrol API of a kube-apiserver)
// and the OpenAPI of the served types.
func NewRecommendedConfig(codecs serializer.CodecFactory) (*genericapiserver.RecommendedConfig, error) {
	generic := genericapiserver.NewRecommendedConfig(codecs)
	generic.EffectiveVersion = servedVersion{kubeEffectiveVersion()}
	generic.FlowControl = nil
	openAPIScheme, err := newOpenAPIScheme()
	if err != nil {
		return nil, err
	}
	generic.OpenAPIConfig, generic.OpenAPIV3Config = openAPIConfigs(openAPIScheme)
	return generic, nil
}

// kubeEffectiveVersion is the Kubernetes API level this server implements
// (/version reports it, with our own release beside it: servedVersion).
//
// k8s.io/apiserver registers a process-wide "kube" component version
// derived from the component-base version variables, which our build sets
// to our own 0.x release. The CEL environments of device selectors take
// their compatibility version from it and would lack the DRA variables
// (introduced in 1.31), so it is moved to the API level we implement.
func kubeEffectiveVersion() basecompatibility.EffectiveVersion {
	effective := basecompatibility.NewEffectiveVersionFromString(baseversion.DefaultKubeBinaryVersion, "", "")
	global, _ := utilcompatibility.DefaultComponentGlobalsRegistry.ComponentGlobalsOrRegister(
		basecompatibility.DefaultKubeComponent, effective, utilfeature.DefaultMutableFeatureGate)
	if global != effective && global.MinCompatibilityVersion().LessThan(effective.MinCompatibilityVersion()) {
		global.SetEmulationVersion(effective.EmulationVersion())
		global.SetMinCompatibilityVersion(effective.MinCompatibilityVersion())
	}
	return effective
}

// Complete fills in the generic defaults.
func (c *Config) Complete() CompletedConfig {
	// Requests that are the client's mistake get a 4xx naming the field:
	// patches are kept so that the stores can say which field one fails
	// at, and malformed resource versions and timeouts are refused up
	// front.
	scheme := c.Extra.Scheme
	if c.Extra.DeviceMap {
		deviceMapLongRunning(c.Generic)
	}
	c.Generic.BuildHandlerChainFunc = func(apiHandler http.Handler, generic *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(withAPIChecks(apiHandler, scheme, generic), generic)
	}
	return CompletedConfig{&completedConfig{
		Generic: c.Generic.Complete(),
		Extra:   &c.Extra,
	}}
}

// withAPIChecks wraps the API handlers (the generic server's director)
// in our request checks, inside the generic filters.
func withAPIChecks(apiHandler http.Handler, scheme patcherrors.Scheme, generic *genericapiserver.Config) http.Handler {
	return withWriteCounts(withQueryChecks(patcherrors.WithPatch(apiHandler, scheme, generic.MaxRequestBodyBytes)))
}

// Server is a running-ready dra-apiserver.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
	extra            *ExtraConfig
}

// New builds the server: API groups installed, post-start hooks added.
func (c CompletedConfig) New() (*Server, error) {
	// New serves the OpenAPI documents itself, building each on first
	// request (installOpenAPI).
	c.Generic.SkipOpenAPIInstallation = true
	generic, err := c.Generic.New("dra-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("build generic API server: %w", err)
	}
	s := &Server{GenericAPIServer: generic, extra: c.Extra}
	generic.Handler.GoRestfulContainer.Router(newRouteSelector())
	optsGetter := c.Generic.RESTOptionsGetter
	handlers := newHandlerInstaller(c.Generic.Config)
	adminAccess := c.Extra.adminAccess()
	// The clients in the process (informers, controllers, simulator) call
	// the handlers directly; their requests skip the filters that do
	// nothing for them (inProcessHandler). They share one set of
	// informers: each resource is watched, decoded and cached once.
	inProcess := c.Extra.InProcess
	if inProcess == nil {
		inProcess = NewInProcess()
	}
	handlers.direct = &inProcess.direct
	inProcess.setHandler(newInProcessHandler(c.Generic.Config, generic.Handler,
		withAPIChecks(generic.Handler.Director, c.Extra.Scheme, c.Generic.Config)))
	pools, err := installResourceAPI(generic, handlers, c.Extra.Scheme, c.Extra.Codecs, optsGetter, adminAccess, c.Extra.NodeRestriction, inProcess, c.Extra.UpstreamResourceAPI)
	if err != nil {
		return nil, err
	}
	// In cluster mode the owner mark of draplane's devices is no taint
	// to the pool view and the device map.
	ownerMark := ""
	if inProcess.informers.OnHost() && c.Extra.ControllerManager != nil {
		ownerMark = c.Extra.ControllerManager.OwnerTaintKey
		pools.Tracker().SetOwnerMark(context.Background(), ownerMark)
	}
	if c.Extra.DeviceMap {
		// Pods where the shared informers see them: core-lite's, or the
		// host's in cluster mode.
		if err := installDeviceMap(generic, pools.Tracker(), inProcess, c.Extra.CoreLite != nil || inProcess.informers.OnHost(), ownerMark); err != nil {
			return nil, err
		}
	}
	// The controller manager starts every in-process controller: those
	// it is configured for and core-lite's, which run on every replica
	// (with core-lite, a manager exists even when nothing else runs).
	var manager *controllermanager.ControllerManager
	if c.Extra.ControllerManager != nil || c.Extra.CoreLite != nil {
		var config controllermanager.Config
		if c.Extra.ControllerManager != nil {
			config = *c.Extra.ControllerManager
		}
		manager = controllermanager.New(config)
		manager.UseSharedInformers(&inProcess.informers)
	}
	if c.Extra.CoreLite != nil {
		if err := c.Extra.CoreLite.install(generic, handlers, c.Extra.Scheme, c.Extra.Codecs, optsGetter, c.Generic.Authorization.Authorizer, manager); err != nil {
			return nil, err
		}
	}
	if manager != nil {
		if err := c.addControllerManager(generic, manager, inProcess); err != nil {
			return nil, err
		}
	}
	if c.Extra.CABundle != nil {
		injector, err := pki.NewCABundleInjector(*c.Extra.CABundle)
		if err != nil {
			return nil, err
		}
		// In the background: the APIServices may not exist yet, and
		// readiness must not wait for the host cluster.
		if err := generic.AddPostStartHook("inject-apiservice-ca-bundle", func(hook genericapiserver.PostStartHookContext) error {
			go injector.Run(hook.Context)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := generic.AddPostStartHook("print-kubeconfig", s.printKubeconfig); err != nil {
		return nil, err
	}
	// Last: the documents cover the web services installed by now.
	if err := installOpenAPI(generic, c.Generic.OpenAPIConfig, c.Generic.OpenAPIV3Config); err != nil {
		return nil, err
	}
	return s, nil
}

// addControllerManager runs the controllers that run on every replica,
// and the leader-elected controllers and the simulator as configured,
// once the server serves.
func (c CompletedConfig) addControllerManager(generic *genericapiserver.GenericAPIServer, manager *controllermanager.ControllerManager, inProcess http.Handler) error {
	for _, controller := range manager.EveryReplica() {
		if err := generic.AddPostStartHook("start-"+controller.Name(), func(hook genericapiserver.PostStartHookContext) error {
			return manager.StartEveryReplica(hook, controller)
		}); err != nil {
			return err
		}
	}
	config := c.Extra.ControllerManager
	if config == nil {
		return nil
	}
	// Leader-elected work stops, and hands back its leases, before the
	// server stops serving: pre-shutdown hooks run while it still does.
	if err := generic.AddPreShutdownHook("release-leader-leases", func() error {
		manager.ReleaseLeases(5 * time.Second)
		return nil
	}); err != nil {
		return err
	}
	if config.Controllers {
		if config.Host == nil && c.Extra.CoreLite == nil {
			// Pods, nodes and leases live in a host cluster then; running
			// against one is the aggregated mode's job.
			klog.Background().Info("Not running controllers: they need core-lite (pods, nodes, leases) in this mode")
		} else if err := generic.AddPostStartHook("start-controllers", func(hook genericapiserver.PostStartHookContext) error {
			return manager.StartControllers(hook, inProcessConfig(hook.LoopbackClientConfig, inProcess))
		}); err != nil {
			return err
		}
	}
	if config.Simulator != nil {
		if c.Extra.CoreLite == nil {
			// Simulated nodes and their pods live in core-lite.
			klog.Background().Info("Not running the simulator: it needs core-lite (pods, nodes, leases)")
			return nil
		}
		if err := generic.AddReadyzChecks(manager.SimulatorReadyzCheck()); err != nil {
			return err
		}
		if err := generic.AddPostStartHook("start-simulator", func(hook genericapiserver.PostStartHookContext) error {
			// The simulated nodes act as their own node identities, which
			// the default roles authorize: register them once those are in.
			select {
			case <-c.Extra.CoreLite.RolesReady():
			case <-hook.Done():
				return hook.Err()
			}
			return manager.StartSimulator(hook, inProcessConfig(hook.LoopbackClientConfig, inProcess))
		}); err != nil {
			return err
		}
	}
	return nil
}

// printKubeconfig tells the user where the data is and how to connect.
func (s *Server) printKubeconfig(hookContext genericapiserver.PostStartHookContext) error {
	fmt.Fprintf(os.Stdout, "draplane: data directory %s\n", s.extra.DataDir)
	fmt.Fprintf(os.Stdout, "draplane: serving on %s\n", s.extra.ServerURL)
	if s.extra.DeviceMap {
		fmt.Fprintf(os.Stdout, "draplane: device map at %s%s (through `kubectl proxy`: http://127.0.0.1:8001%s)\n", s.extra.ServerURL, devicemap.Path, devicemap.Path)
	}
	fmt.Fprintf(os.Stdout, "export KUBECONFIG=%s\n", s.extra.KubeconfigPath)
	return nil
}

// Run serves until ctx ends, then stops the embedded etcd.
func (s *Server) Run(ctx context.Context) error {
	defer s.extra.Lock.Unlock()
	defer s.extra.Etcd.Close()
	start := time.Now()
	err := s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
	klog.FromContext(ctx).V(2).Info("Server stopped", "uptime", time.Since(start))
	return err
}
