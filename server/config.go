package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/admission"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

// Config is everything the server is built from, resolved from Options:
// listeners bound, certificates on disk, embedded etcd running.
type Config struct {
	Generic *genericapiserver.RecommendedConfig
	Extra   ExtraConfig
}

// ExtraConfig is what the generic config has no place for.
type ExtraConfig struct {
	Scheme   *runtime.Scheme
	DataDir  string
	CoreLite bool
	// Controllers says whether and how the controllers run.
	Controllers *ControllerOptions
	// Simulator says whether and what the simulator simulates.
	Simulator *SimulatorOptions
	// Aggregated says whether the server runs aggregated into a host
	// cluster, and how to reach it.
	Aggregated *AggregatedOptions
	// KubeconfigPath is the admin kubeconfig written for this server.
	KubeconfigPath string
	// ServerURL is where clients reach the API.
	ServerURL string
	// etcd is the embedded etcd, nil with --etcd-servers.
	etcd *embeddedEtcd
	// lock keeps a second server off the data dir.
	lock *dataDirLock
	// coreLite is set when core-lite is served.
	coreLite *coreLite
	codecs   serializer.CodecFactory
}

type completedConfig struct {
	Generic genericapiserver.CompletedConfig
	Extra   *ExtraConfig
}

// CompletedConfig can build a Server; only Config.Complete makes one.
type CompletedConfig struct {
	*completedConfig
}

// Config resolves the options into a Config. With no --etcd-servers it
// starts the embedded etcd; the caller owns it through the Server (or
// Config.Close when building the server fails).
func (o *Options) Config(ctx context.Context) (*Config, error) {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}

	// Etcd takes the longest to start; everything else is done meanwhile.
	type etcdResult struct {
		etcd *embeddedEtcd
		err  error
	}
	etcdDone := make(chan etcdResult, 1)
	if o.embedded() {
		go func() {
			e, err := startEmbeddedEtcd(ctx, etcdDir(o.DataDir), o.EmbeddedEtcd)
			etcdDone <- etcdResult{e, err}
		}()
	} else {
		etcdDone <- etcdResult{}
	}
	var etcd etcdResult
	etcdReceived := false
	waitForEtcd := func() etcdResult {
		if !etcdReceived {
			etcd, etcdReceived = <-etcdDone, true
		}
		return etcd
	}
	ok := false
	defer func() {
		if !ok {
			if r := waitForEtcd(); r.etcd != nil {
				r.etcd.Close()
			}
			lock.Unlock()
		}
	}()
	cfg := &Config{}

	scheme, codecs, err := newScheme(o.CoreLite)
	if err != nil {
		return nil, err
	}
	cfg.Extra = ExtraConfig{Scheme: scheme, codecs: codecs, DataDir: o.DataDir, CoreLite: o.CoreLite, Controllers: o.Controllers, Simulator: o.Simulator, Aggregated: o.Aggregated, lock: lock}

	ca, err := loadOrCreatePKI(pkiDir(o.DataDir))
	if err != nil {
		return nil, err
	}
	if o.SecureServing.ServerCert.CertKey.CertFile == "" && o.SecureServing.ServerCert.GeneratedCert == nil {
		dnsNames, ips := o.Aggregated.servingNames(servingNames(o.SecureServing.BindAddress))
		certFile, keyFile, err := ca.ensureServingCert(dnsNames, ips)
		if err != nil {
			return nil, err
		}
		o.SecureServing.ServerCert.CertKey.CertFile = certFile
		o.SecureServing.ServerCert.CertKey.KeyFile = keyFile
	}

	generic := genericapiserver.NewRecommendedConfig(codecs)
	cfg.Generic = generic
	generic.EffectiveVersion = kubeEffectiveVersion()
	// Priority-and-fairness needs the flowcontrol API of a kube-apiserver.
	generic.FlowControl = nil

	if o.SecureServing.BindPort == 0 && o.SecureServing.Listener == nil {
		// Port 0 would turn serving off in the generic options; here it
		// means "any free port", reported in the kubeconfig.
		host := "127.0.0.1"
		if ip := o.SecureServing.BindAddress; ip != nil {
			host = ip.String()
		}
		listener, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("listen on a free port: %w", err)
		}
		o.SecureServing.Listener = listener
		o.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	}
	if err := o.SecureServing.ApplyToConfig(&generic.Config); err != nil {
		return nil, fmt.Errorf("secure serving: %w", err)
	}

	openAPIScheme, err := newOpenAPIScheme()
	if err != nil {
		return nil, err
	}
	generic.OpenAPIConfig, generic.OpenAPIV3Config = openAPIConfigs(openAPIScheme)

	if err := o.Authentication.ApplyTo(&generic.Authentication, generic.SecureServing, generic.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&generic.Authorization); err != nil {
		return nil, fmt.Errorf("authorization: %w", err)
	}

	port := o.SecureServing.BindPort
	if addr, ok := generic.SecureServing.Listener.Addr().(*net.TCPAddr); ok {
		port = addr.Port
	}
	host := "127.0.0.1"
	if ip := o.SecureServing.BindAddress; ip != nil && !ip.IsUnspecified() {
		host = ip.String()
	}
	generic.ExternalAddress = net.JoinHostPort(host, strconv.Itoa(port))
	cfg.Extra.ServerURL = "https://" + generic.ExternalAddress

	certPEM, keyPEM, err := ca.ensureAdminCert()
	if err != nil {
		return nil, err
	}
	cfg.Extra.KubeconfigPath = filepath.Join(o.DataDir, AdminKubeconfigName)
	if err := writeAdminKubeconfig(cfg.Extra.KubeconfigPath, cfg.Extra.ServerURL, ca.caPEM, certPEM, keyPEM); err != nil {
		return nil, err
	}

	if cfg.Extra.CoreLite {
		coreLite, plugin, err := newCoreLite(generic.LoopbackClientConfig)
		if err != nil {
			return nil, err
		}
		generic.AdmissionControl = plugin
		cfg.Extra.coreLite = coreLite
	} else {
		generic.AdmissionControl = admission.NewChainHandler()
	}

	r := waitForEtcd()
	if r.err != nil {
		return nil, r.err
	}
	cfg.Extra.etcd = r.etcd
	etcdOptions := *o.Etcd
	if r.etcd != nil {
		etcdOptions.StorageConfig.Transport.ServerList = []string{r.etcd.ClientURL}
	}
	storageFactory := serverstorage.NewDefaultStorageFactory(
		etcdOptions.StorageConfig,
		etcdOptions.DefaultStorageMediaType,
		codecs,
		serverstorage.NewDefaultResourceEncodingConfigForEffectiveVersion(scheme, generic.EffectiveVersion),
		generic.MergedResourceConfig,
		nil,
	)
	if err := etcdOptions.ApplyWithStorageFactoryTo(storageFactory, &generic.Config); err != nil {
		return nil, fmt.Errorf("etcd storage: %w", err)
	}
	ok = true
	return cfg, nil
}

// Close releases what Config started when no Server takes it over.
func (c *Config) Close() {
	if c != nil {
		c.Extra.etcd.Close()
		c.Extra.lock.Unlock()
	}
}

// kubeEffectiveVersion is the Kubernetes API level this server implements
// (our own release version is what /version reports as gitVersion).
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

// servingNames are the names the serving certificate is valid for.
func servingNames(bind net.IP) ([]string, []net.IP) {
	dnsNames := []string{"localhost"}
	if hostname, err := os.Hostname(); err == nil && hostname != "" && hostname != "localhost" {
		dnsNames = append(dnsNames, hostname)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	if bind != nil && !bind.IsUnspecified() && !bind.IsLoopback() {
		ips = append(ips, bind)
	}
	return dnsNames, ips
}

// Complete fills in the generic defaults.
func (c *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{
		Generic: c.Generic.Complete(),
		Extra:   &c.Extra,
	}}
}

// Server is a running-ready dra-apiserver.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
	extra            *ExtraConfig
}

// New builds the server: API groups installed, post-start hooks added.
func (c CompletedConfig) New() (*Server, error) {
	generic, err := c.Generic.New("dra-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("build generic API server: %w", err)
	}
	s := &Server{GenericAPIServer: generic, extra: c.Extra}
	optsGetter := c.Generic.RESTOptionsGetter
	if err := installResourceAPI(generic, c.Extra.Scheme, c.Extra.codecs, optsGetter); err != nil {
		return nil, err
	}
	if c.Extra.coreLite != nil {
		if err := c.Extra.coreLite.install(generic, c.Extra.Scheme, c.Extra.codecs, optsGetter); err != nil {
			return nil, err
		}
	}
	if c.Extra.Controllers != nil {
		// Leader-elected work stops, and hands back its leases, before the
		// server stops serving: pre-shutdown hooks run while it still does.
		leases := &leaseHolders{}
		c.Extra.Controllers.leases = leases
		if err := generic.AddPreShutdownHook("release-leader-leases", func() error {
			leases.release(5 * time.Second)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if c.Extra.Controllers != nil && c.Extra.Controllers.Run {
		if c.Extra.Aggregated != nil && c.Extra.Aggregated.Aggregated() {
			// Pods, nodes, events and leases are the host cluster's.
			host, err := c.Extra.Aggregated.hostConfig()
			if err != nil {
				return nil, err
			}
			c.Extra.Controllers.host = host
			c.Extra.Controllers.podMode = c.Extra.Aggregated.podMode()
			if err := generic.AddPostStartHook("start-controllers", c.Extra.Controllers.startControllers); err != nil {
				return nil, err
			}
		} else if c.Extra.coreLite == nil {
			// Pods, nodes and leases live in a host cluster then; running
			// against one is the aggregated mode's job.
			klog.Background().Info("Not running controllers: they need core-lite (pods, nodes, leases) in this mode")
		} else if err := generic.AddPostStartHook("start-controllers", c.Extra.Controllers.startControllers); err != nil {
			return nil, err
		}
	}
	if c.Extra.Simulator.enabled() {
		if c.Extra.coreLite == nil {
			// Simulated nodes and their pods live in core-lite.
			klog.Background().Info("Not running the simulator: it needs core-lite (pods, nodes, leases)")
		} else {
			runner := newSimulatorRunner(c.Extra.Simulator, c.Extra.Controllers)
			if err := generic.AddReadyzChecks(runner.readyzCheck()); err != nil {
				return nil, err
			}
			if err := generic.AddPostStartHook("start-simulator", runner.start); err != nil {
				return nil, err
			}
		}
	}
	if err := generic.AddPostStartHook("print-kubeconfig", s.printKubeconfig); err != nil {
		return nil, err
	}
	return s, nil
}

// printKubeconfig tells the user where the data is and how to connect.
func (s *Server) printKubeconfig(hookContext genericapiserver.PostStartHookContext) error {
	fmt.Fprintf(os.Stdout, "draplane: data directory %s\n", s.extra.DataDir)
	fmt.Fprintf(os.Stdout, "draplane: serving on %s\n", s.extra.ServerURL)
	fmt.Fprintf(os.Stdout, "export KUBECONFIG=%s\n", s.extra.KubeconfigPath)
	return nil
}

// Run serves until ctx ends, then stops the embedded etcd.
func (s *Server) Run(ctx context.Context) error {
	defer s.extra.lock.Unlock()
	defer s.extra.etcd.Close()
	start := time.Now()
	err := s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
	klog.FromContext(ctx).V(2).Info("Server stopped", "uptime", time.Since(start))
	return err
}
