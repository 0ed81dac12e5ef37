package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/admission"
	authnunion "k8s.io/apiserver/pkg/authentication/request/union"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/klog/v2"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/auth/nodetoken"
	"github.com/draplane/draplane/internal/codec"
	"github.com/draplane/draplane/internal/server/etcdstorage"
	"github.com/draplane/draplane/internal/server/pki"
	"k8s.io/client-go/kubernetes"

	"github.com/draplane/draplane/internal/controllermanager"
	"github.com/draplane/draplane/internal/server"
)

// Config resolves the options into a server.Config. With no
// --etcd-servers it starts the embedded etcd; the caller owns it through
// the Server (or Config.Close when building the server fails).
func (o *Options) Config(ctx context.Context) (*server.Config, error) {
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	lock, err := etcdstorage.LockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}
	// Etcd takes the longest to start; everything else is done meanwhile.
	etcd := o.startEtcd(ctx)
	cfg, err := o.config(ctx, etcd)
	if err != nil {
		// Waits for etcd, so that a failure never leaves it running.
		if e, _ := etcd.wait(); e != nil {
			e.Close()
		}
		lock.Unlock()
		return nil, err
	}
	cfg.Extra.Lock = lock
	return cfg, nil
}

// config builds everything but the data dir lock; etcd is waited for only
// when storage needs its address.
func (o *Options) config(ctx context.Context, etcd *startingEtcd) (*server.Config, error) {
	scheme, codecs, err := server.NewScheme(o.CoreLite)
	if err != nil {
		return nil, err
	}
	generic, err := server.NewRecommendedConfig(codecs)
	if err != nil {
		return nil, err
	}
	cfg := &server.Config{Generic: generic, Extra: server.ExtraConfig{Scheme: scheme, Codecs: codecs, DataDir: o.DataDir,
		UpstreamResourceAPI: o.Aggregated.upstreamResourceAPI(), DeviceMap: o.DeviceMap.enabled(o.Aggregated.Aggregated())}}
	generatedCert := o.SecureServing.ServerCert.CertKey.CertFile == "" && o.SecureServing.ServerCert.GeneratedCert == nil
	if err := o.applyServing(ctx, generic); err != nil {
		return nil, err
	}
	if cfg.Extra.CABundle, err = o.caBundleConfig(generatedCert); err != nil {
		return nil, err
	}
	if err := o.Authentication.ApplyTo(&generic.Authentication, generic.SecureServing, generic.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	// Without front-proxy authentication, a request's user follows from
	// its client certificates alone unless it carries a token: remember
	// each chain's check instead of repeating it on every request.
	if generic.Authentication.RequestHeaderConfig == nil && generic.Authentication.Authenticator != nil {
		generic.Authentication.Authenticator = pki.CacheClientCertificates(generic.Authentication.Authenticator, pki.ClientCertCacheTTL)
	}
	// The simulated nodes' in-process clients authenticate as their nodes
	// with tokens minted from the loopback token (inprocess.NodeClients),
	// instead of impersonating them.
	if generic.Authentication.Authenticator != nil && generic.LoopbackClientConfig != nil && generic.LoopbackClientConfig.BearerToken != "" {
		generic.Authentication.Authenticator = authnunion.New(nodetoken.NewAuthenticator(generic.LoopbackClientConfig.BearerToken), generic.Authentication.Authenticator)
	}
	// The node restriction: of node certificates in core-lite's chain
	// (standalone), of drivers' service accounts in aggregated mode. The
	// chain asks it about creates and deletes; the stores of slices and
	// claim status run its checks of updates (ExtraConfig.NodeRestriction).
	nodeRestriction := node.NewAdmission()
	if nodeRestriction.DriverServiceAccounts, err = o.Aggregated.driverServiceAccounts(); err != nil {
		return nil, err
	}
	generic.AdmissionControl = admission.NewChainHandler()
	if len(nodeRestriction.DriverServiceAccounts) > 0 {
		generic.AdmissionControl = admission.NewChainHandler(nodeRestriction)
		cfg.Extra.NodeRestriction = nodeRestriction
	}
	cfg.Extra.InProcess = server.NewInProcess()
	// The stores of resources without a watch cache guess the object an
	// update or delete starts from (etcdstorage.Guesses).
	guesses := &etcdstorage.Guesses{}
	if o.Aggregated.ScheduleHostPods && o.Aggregated.Aggregated() {
		// The controllers, resourcepools and the device map watch the
		// host's pods, nodes, claims and slices.
		host, err := o.Aggregated.hostConfig()
		if err != nil {
			return nil, err
		}
		cfg.Extra.InProcess.WatchHost(host)
	}
	if o.CoreLite {
		shared, err := cfg.Extra.InProcess.Informers(generic.LoopbackClientConfig)
		if err != nil {
			return nil, err
		}
		coreLite, plugin, err := server.NewCoreLite(generic.LoopbackClientConfig, shared, nodeRestriction)
		if err != nil {
			return nil, err
		}
		generic.AdmissionControl = plugin
		cfg.Extra.CoreLite = coreLite
		// Core-lite is standalone only: the shared informers watch this
		// server's own pods and claims, and core-lite's authorizer has
		// them watch both whatever else runs. (Aggregated, the stores of
		// claims read them from etcd: the shared informers are made
		// later, and watch claims only while controllers run.)
		guesses.Set(corev1.Resource("pods"), shared.GuessPods())
		guesses.Set(schema.GroupResource{Group: resourceapi.GroupName, Resource: "resourceclaims"}, shared.GuessClaims())
		cfg.Extra.NodeRestriction = nodeRestriction
	}
	if err := o.applyAuthorization(&generic.Authorization, cfg.Extra.CoreLite); err != nil {
		return nil, fmt.Errorf("authorization: %w", err)
	}
	cfg.Extra.ServerURL = o.externalAddress(generic)
	if cfg.Extra.KubeconfigPath, err = pki.WriteAdminKubeconfig(o.DataDir, cfg.Extra.ServerURL); err != nil {
		return nil, err
	}
	if cfg.Extra.ControllerManager, err = o.controllerManagerConfig(); err != nil {
		return nil, err
	}
	if cfg.Extra.HostNamespaces, err = o.Aggregated.hostNamespaces(); err != nil {
		return nil, err
	}
	if cfg.Extra.Etcd, err = etcd.wait(); err != nil {
		return nil, err
	}
	if err := o.applyStorage(generic, scheme, codecs, cfg.Extra.Etcd, guesses); err != nil {
		return nil, err
	}
	return cfg, nil
}

// startingEtcd is the embedded etcd while it starts.
type startingEtcd struct {
	done chan struct{}
	etcd *etcdstorage.EmbeddedEtcd
	err  error
}

// startEtcd starts the embedded etcd in the background; with
// --etcd-servers there is none to start.
func (o *Options) startEtcd(ctx context.Context) *startingEtcd {
	s := &startingEtcd{done: make(chan struct{})}
	if !o.embedded() {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		s.etcd, s.err = etcdstorage.StartEmbeddedEtcd(ctx, o.DataDir, o.EmbeddedEtcd.config())
	}()
	return s
}

// wait returns the started etcd (nil with --etcd-servers); it can be
// called more than once.
func (s *startingEtcd) wait() (*etcdstorage.EmbeddedEtcd, error) {
	<-s.done
	return s.etcd, s.err
}

// applyServing signs a serving certificate by the data dir's CA unless one
// is given, binds a free port for --secure-port=0 and applies the serving
// options and the loopback client.
func (o *Options) applyServing(ctx context.Context, generic *genericapiserver.RecommendedConfig) error {
	if o.SecureServing.ServerCert.CertKey.CertFile == "" && o.SecureServing.ServerCert.GeneratedCert == nil {
		if err := o.syncSharedCA(ctx); err != nil {
			return err
		}
		dnsNames, ips := o.Aggregated.servingNames(servingNames(o.SecureServing.BindAddress))
		certFile, keyFile, err := pki.EnsureServingCert(o.DataDir, dnsNames, ips)
		if err != nil {
			return err
		}
		o.SecureServing.ServerCert.CertKey.CertFile = certFile
		o.SecureServing.ServerCert.CertKey.KeyFile = keyFile
	}
	if o.SecureServing.BindPort == 0 && o.SecureServing.Listener == nil {
		// Port 0 would turn serving off in the generic options; here it
		// means "any free port", reported in the kubeconfig.
		host := "127.0.0.1"
		if ip := o.SecureServing.BindAddress; ip != nil {
			host = ip.String()
		}
		listener, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return fmt.Errorf("listen on a free port: %w", err)
		}
		o.SecureServing.Listener = listener
		o.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	}
	if err := o.SecureServing.SecureServingOptions.ApplyTo(&generic.SecureServing); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	return pki.ApplyLoopbackClient(&generic.Config)
}

// syncSharedCA puts the CA of --shared-ca-secret into the data dir, where
// the serving certificate is signed with it.
func (o *Options) syncSharedCA(ctx context.Context) error {
	if !o.Aggregated.Aggregated() || o.Aggregated.SharedCASecret == "" {
		return nil
	}
	host, err := o.Aggregated.hostConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(host)
	if err != nil {
		return fmt.Errorf("--shared-ca-secret: client of the host cluster: %w", err)
	}
	shared := pki.SharedCA{Client: client, Namespace: o.Aggregated.ServiceNamespace, Name: o.Aggregated.SharedCASecret}
	return shared.Sync(ctx, o.DataDir)
}

// externalAddress sets the address clients reach the server at and
// returns its URL.
func (o *Options) externalAddress(generic *genericapiserver.RecommendedConfig) string {
	port := o.SecureServing.BindPort
	if addr, ok := generic.SecureServing.Listener.Addr().(*net.TCPAddr); ok {
		port = addr.Port
	}
	host := "127.0.0.1"
	if ip := o.SecureServing.BindAddress; ip != nil && !ip.IsUnspecified() {
		host = ip.String()
	}
	generic.ExternalAddress = net.JoinHostPort(host, strconv.Itoa(port))
	return "https://" + generic.ExternalAddress
}

// applyStorage stores every resource in etcd: the embedded one when it
// runs, else --etcd-servers.
func (o *Options) applyStorage(generic *genericapiserver.RecommendedConfig, scheme *runtime.Scheme, codecs serializer.CodecFactory, etcd *etcdstorage.EmbeddedEtcd, guesses *etcdstorage.Guesses) error {
	etcdOptions := *o.Etcd
	if etcd != nil {
		etcdOptions.StorageConfig.Transport.ServerList = []string{etcd.ClientURL}
	}
	// Every object is stored in --storage-media-type (protobuf unless
	// set); values stored as JSON before stay readable, since the storage
	// decoder recognises either encoding, and are read with the serving
	// codecs' faster apiVersion and kind lookup.
	storageCodecs := codec.WithTypeMetaFactory(scheme, codecs, false)
	storageFactory := serverstorage.NewDefaultStorageFactory(
		etcdOptions.StorageConfig,
		etcdOptions.DefaultStorageMediaType,
		storageCodecs,
		serverstorage.NewDefaultResourceEncodingConfigForEffectiveVersion(scheme, generic.EffectiveVersion),
		generic.MergedResourceConfig,
		nil,
	)
	if err := etcdOptions.ApplyWithStorageFactoryTo(storageFactory, &generic.Config); err != nil {
		return fmt.Errorf("etcd storage: %w", err)
	}
	cached, err := watchCached(&etcdOptions)
	if err != nil {
		return err
	}
	if etcd != nil {
		// The embedded etcd is called directly, not over gRPC.
		generic.RESTOptionsGetter = etcd.InProcessRESTOptions(generic.RESTOptionsGetter, cached, guesses)
	} else {
		// The same watch caches as with the embedded etcd.
		generic.RESTOptionsGetter = etcdstorage.CachingRESTOptions(generic.RESTOptionsGetter, cached, guesses)
	}
	return nil
}

// watchCached says which resources have a watch cache, as the generic
// etcd options decide it: all with --watch-cache, except those that
// --watch-cache-sizes gives the size 0.
func watchCached(o *genericoptions.EtcdOptions) (func(schema.GroupResource) bool, error) {
	sizes, err := genericoptions.ParseWatchCacheSizes(o.WatchCacheSizes)
	if err != nil {
		return nil, fmt.Errorf("--watch-cache-sizes: %w", err)
	}
	return func(resource schema.GroupResource) bool {
		size, ok := sizes[resource]
		return o.EnableWatchCache && (!ok || size > 0)
	}, nil
}

// controllerManagerConfig is what runs in-process: the controllers (on
// the host cluster's pods and nodes in aggregated mode) and the simulator.
func (o *Options) controllerManagerConfig() (*controllermanager.Config, error) {
	c := &controllermanager.Config{PodMode: o.Aggregated.podMode(), Simulator: o.Simulator.config(), OwnerTaintKey: o.Aggregated.OwnerTaintKey}
	o.Controllers.ApplyTo(c)
	if o.Controllers.Run && o.Aggregated.Aggregated() {
		// Pods, nodes, events and leases are the host cluster's.
		host, err := o.Aggregated.hostConfig()
		if err != nil {
			return nil, err
		}
		c.Host = host
	}
	return c, nil
}

// caBundleConfig says which CA the server writes into its APIServices: in
// aggregated mode, with --inject-ca-bundle, when the serving certificate
// is the one signed by the data dir's CA.
func (o *Options) caBundleConfig(generatedCert bool) (*pki.CABundleConfig, error) {
	if !o.Aggregated.Aggregated() || !o.Aggregated.InjectCABundle {
		return nil, nil
	}
	if !generatedCert {
		klog.Background().Info("Not writing the APIServices' caBundle: the serving certificate comes from --tls-cert-file, whose CA the server does not know")
		return nil, nil
	}
	host, err := o.Aggregated.hostConfig()
	if err != nil {
		return nil, err
	}
	return &pki.CABundleConfig{Host: host, APIServices: APIServiceNames(), CAFile: pki.CAFile(o.DataDir)}, nil
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
