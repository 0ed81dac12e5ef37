// Package app is the dra-apiserver command: its options own the flags,
// Complete and Validate them, and resolve them into the server.Config the
// API server is built from.
package app

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/runtime"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"

	_ "github.com/draplane/draplane/internal/features" // registers the DRA gates for --feature-gates
	"github.com/draplane/draplane/internal/server/pki"
)

const (
	// DefaultSecurePort is the port of the API (6443 belongs to a real
	// kube-apiserver that may run on the same machine).
	DefaultSecurePort = 6444
	// etcdPrefix is the key prefix of every object in etcd.
	etcdPrefix = "/registry"
)

// Options are everything a user can set on the command line.
//
// We compose k8s.io/apiserver's option pieces instead of taking the whole
// RecommendedOptions: Etcd, SecureServing (with loopback, for the
// controllers and admission clients), and the delegating Authentication and
// Authorization options (client certificates from our CA and requestheader
// now, TokenReview/SubjectAccessReview once aggregated). Audit, egress
// selection, tracing and the core-API/feature options are left out: they
// need a kube-apiserver behind them (CoreAPI, priority-and-fairness) or are
// not used by a development control plane, and each would add flags that
// do nothing.
type Options struct {
	// DataDir holds the embedded etcd, the CA and the certificates it
	// signed, and the admin kubeconfig.
	DataDir string
	// CoreLite serves core/v1 namespaces, pods, nodes, events and
	// coordination.k8s.io leases, so pods exist without a cluster. Turned
	// off when a real cluster serves them (aggregated mode).
	CoreLite bool

	// Aggregated chooses the mode (--mode) and holds aggregated mode's
	// flags (aggregated.go).
	Aggregated     *AggregatedOptions
	Controllers    *ControllerOptions
	Simulator      *SimulatorOptions
	DeviceMap      *DeviceMapOptions
	Etcd           *genericoptions.EtcdOptions
	EmbeddedEtcd   *EmbeddedEtcdOptions
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	Logs           *logsapi.LoggingConfiguration
	// GCPercent is the garbage collector's target (Go's GOGC) for the
	// server process, applied by ApplyGCPercent.
	GCPercent int
}

// DefaultGCPercent is the server's GOGC unless --gc-percent or the GOGC
// environment variable says otherwise. A collection starts once the heap
// has grown by this percentage of what the last one left live: twice
// Go's default of 100 halves the collections of a server that allocates
// much for each request and keeps little. With 2,500 pods placed on 500
// nodes (test/bench/README.md) it took 12% less CPU per pod and bound
// 16% more pods per second for 120 MiB more RSS; the live heap is the
// same.
const DefaultGCPercent = 200

// NewOptions returns the defaults: standalone, embedded etcd, 127.0.0.1:6444.
func NewOptions() *Options {
	o := &Options{
		CoreLite:       true,
		Aggregated:     NewAggregatedOptions(),
		Controllers:    NewControllerOptions(),
		Simulator:      NewSimulatorOptions(),
		DeviceMap:      &DeviceMapOptions{},
		Etcd:           genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig(etcdPrefix, nil)),
		EmbeddedEtcd:   NewEmbeddedEtcdOptions(),
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		Logs:           logsapi.NewLoggingConfiguration(),
		GCPercent:      DefaultGCPercent,
	}
	// Objects are stored as protobuf, as kube-apiserver stores them: it
	// decodes several times faster than JSON. What was stored as JSON
	// (every release before protobuf) stays readable; an object is written
	// as protobuf the next time it is written.
	o.Etcd.DefaultStorageMediaType = runtime.ContentTypeProtobuf
	// Not held in a watch cache (--watch-cache-sizes replaces this list):
	// events, as in kube-apiserver, because they are written often and
	// watched rarely; ResourceClaims, because they are the most numerous
	// objects and the controllers' one informer watches them: the cache
	// was a third copy of every claim and placing pods cost the same CPU
	// without it; pods, because the cache was a second copy of every pod
	// and of every version written in its last 75 s (a third of the live
	// heap at 500 nodes), and the shared informers hold each pod anyway:
	// the pods store takes the object an update starts from out of them
	// (etcdstorage.Guesses) instead of reading it from etcd, so placing a
	// pod costs the same CPU without the cache. Nodes and slices keep
	// theirs: every driver's field-selected list of its slices would
	// read and decode all slices from etcd. What the pods cache would
	// still save is the decoding of each pod event for each field-selected
	// pod watch, such as an external node agent's, in addition to the
	// shared informers' (docs/operators.md).
	o.Etcd.WatchCacheSizes = []string{"events#0", "resourceclaims.resource.draplane.dev#0", "pods#0"}
	lightWatchCache()

	o.SecureServing.BindPort = DefaultSecurePort
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	// Our CA signs the serving certificate into the data dir; the generic
	// self-signed fallback directory is not used.
	o.SecureServing.ServerCert.CertDirectory = ""
	o.SecureServing.ServerCert.PairName = "serving"

	// Standalone there is no cluster to ask: no kubeconfig is fine, and the
	// client CA is our own (filled in by Complete).
	o.Authentication.RemoteKubeConfigFileOptional = true
	o.Authentication.SkipInClusterLookup = true
	o.Authorization.RemoteKubeConfigFileOptional = true
	// Health endpoints are open to everyone, the admin group may do
	// anything, everybody else is denied (no SubjectAccessReview without a
	// cluster).
	o.Authorization.AlwaysAllowPaths = []string{"/healthz", "/healthz/*", "/readyz", "/readyz/*", "/livez", "/livez/*"}
	o.Authorization.AlwaysAllowGroups = []string{pki.AdminGroup}
	return o
}

// lightWatchCache turns the generic API server's ListFromCacheSnapshot
// off unless --feature-gates turns it on again. The watch cache then keeps
// no copy-on-write snapshot of its store per event: with it, every write
// copied a path of the cache's B-tree, and the snapshots of the events of
// the cache's history window held the copied paths, which grow with the
// objects written. Without them, a list at an exact older resourceVersion
// or the continuation of a paginated list is read from etcd, as before
// Kubernetes 1.34.
func lightWatchCache() {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(genericfeatures.ListFromCacheSnapshot): false}); err != nil {
		panic(fmt.Sprintf("default %s: %v", genericfeatures.ListFromCacheSnapshot, err))
	}
}

// Flags returns the flags grouped into the sections `--help` shows.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	generic := fss.FlagSet("generic")
	generic.StringVar(&o.DataDir, "data-dir", o.DataDir,
		"Directory for the embedded etcd, the CA, certificates and admin.kubeconfig. Default: $XDG_STATE_HOME/draplane or ~/.local/state/draplane.")
	generic.BoolVar(&o.CoreLite, "core-lite", o.CoreLite,
		"Serve core/v1 namespaces, pods, nodes, events, coordination.k8s.io/v1 leases and scheduling.k8s.io/v1 priorityclasses (standalone). Turn off when a cluster serves them.")
	generic.IntVar(&o.GCPercent, "gc-percent", o.GCPercent,
		"The garbage collector's target percentage, Go's GOGC: a collection starts once the heap has grown by this much of what the last one left live. Higher values use less CPU and more memory. The GOGC environment variable takes precedence unless this flag is given.")

	// --feature-gates: upstream's DRA gates (package features) with their
	// 1.37 defaults, beside the generic API server's own.
	utilfeature.DefaultMutableFeatureGate.AddFlag(fss.FlagSet("feature gates"))
	o.Aggregated.AddFlags(fss.FlagSet("mode"))
	o.Controllers.AddFlags(fss.FlagSet("controllers"))
	o.Simulator.AddFlags(fss.FlagSet("simulator"))
	o.DeviceMap.AddFlags(fss.FlagSet("device map"))
	o.Etcd.AddFlags(fss.FlagSet("etcd"))
	o.EmbeddedEtcd.AddFlags(fss.FlagSet("embedded etcd (when --etcd-servers is empty)"))
	serving := fss.FlagSet("secure serving")
	o.SecureServing.AddFlags(serving)
	if f := serving.Lookup("secure-port"); f != nil {
		f.Usage = "The port on which to serve HTTPS with authentication and authorization. 0 picks a free port (written into admin.kubeconfig)."
	}
	if f := serving.Lookup("cert-dir"); f != nil {
		f.Usage = "Not used: the serving certificate is signed by the data dir's CA into <data-dir>/pki unless --tls-cert-file is given."
	}
	o.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.Authorization.AddFlags(fss.FlagSet("authorization"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	return fss
}

// Complete fills in defaults that depend on the environment.
func (o *Options) Complete() error {
	o.Aggregated.complete(o)
	o.Controllers.complete(o.Aggregated.Aggregated())
	if o.DataDir == "" {
		dir, err := DefaultDataDir()
		if err != nil {
			return err
		}
		o.DataDir = dir
	}
	dir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("data dir %q: %w", o.DataDir, err)
	}
	o.DataDir = dir
	// Aggregated, client certificates are the host's (its client CA from
	// the extension-apiserver-authentication ConfigMap).
	if o.Authentication.ClientCert.ClientCA == "" && !o.Aggregated.Aggregated() {
		o.Authentication.ClientCert.ClientCA = pki.CAFile(o.DataDir)
	}
	return nil
}

// Validate checks the completed options.
func (o *Options) Validate() error {
	var errs []error
	if o.embedded() {
		// The embedded etcd's address is known only once it runs.
		etcd := *o.Etcd
		etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:0"}
		errs = append(errs, etcd.Validate()...)
		errs = append(errs, o.EmbeddedEtcd.Validate()...)
	} else {
		errs = append(errs, o.Etcd.Validate()...)
	}
	errs = append(errs, o.Aggregated.Validate()...)
	if o.GCPercent < 1 {
		errs = append(errs, fmt.Errorf("--gc-percent must be at least 1, got %d", o.GCPercent))
	}
	if o.Aggregated.SharedCASecret != "" && o.SecureServing.ServerCert.CertKey.CertFile != "" {
		errs = append(errs, errors.New("--shared-ca-secret cannot be used with --tls-cert-file: the CA shares the generated serving certificates"))
	}
	errs = append(errs, o.Controllers.Validate()...)
	errs = append(errs, o.Simulator.Validate()...)
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	if err := logsapi.Validate(o.Logs, nil, nil).ToAggregate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// embedded reports whether the server runs its own etcd.
func (o *Options) embedded() bool { return len(o.Etcd.StorageConfig.Transport.ServerList) == 0 }

// DefaultDataDir is the per-user state directory: $XDG_STATE_HOME/draplane,
// else ~/.local/state/draplane.
func DefaultDataDir() (string, error) {
	if state := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(state) {
		return filepath.Join(state, "draplane"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no --data-dir given and no home directory to default to: %w", err)
	}
	return filepath.Join(home, ".local", "state", "draplane"), nil
}

// ApplyGCPercent sets the garbage collector's target to o.GCPercent,
// unless the GOGC environment variable is set and --gc-percent was not
// given (flagGiven): then the Go runtime has applied GOGC already. It
// returns the target in effect.
func (o *Options) ApplyGCPercent(flagGiven bool) int {
	if _, env := os.LookupEnv("GOGC"); env && !flagGiven {
		current := debug.SetGCPercent(o.GCPercent)
		debug.SetGCPercent(current)
		return current
	}
	debug.SetGCPercent(o.GCPercent)
	return o.GCPercent
}
