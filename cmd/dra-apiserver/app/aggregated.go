package app

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
	"github.com/draplane/draplane/internal/controllers/allocation"
	"github.com/draplane/draplane/internal/controllers/podmode"
)

// The modes of --mode.
const (
	// ModeStandalone serves core-lite and trusts only its own CA.
	ModeStandalone = "standalone"
	// ModeAggregated runs behind a kube-apiserver's aggregator (an
	// APIService): see AggregatedOptions.
	ModeAggregated = "aggregated"
)

// AggregatedOptions are the flags of aggregated mode.
//
// The mode is chosen with --mode only; it is never inferred from other
// flags. Standalone accepts the delegated-auth flags too (a TokenReview
// webhook in front of a standalone server is legitimate), so guessing the
// mode from them would turn core-lite off by surprise.
//
// In aggregated mode:
//   - core-lite is off: pods, nodes, events and leases are the host
//     cluster's;
//   - authentication is delegated: front-proxy client certificates from the
//     aggregator (requestheader client CA and allowed names from the
//     kube-system/extension-apiserver-authentication ConfigMap, or the
//     --requestheader-* flags), bearer tokens through TokenReview, client
//     certificates of the host's client CA;
//   - authorization is delegated through SubjectAccessReview (members of
//     system:masters and the health endpoints are allowed without asking);
//   - the controllers (without the pod termination controller, the host's
//     kubelets finish pods) read and write pods, nodes, events and the
//     leader Lease in the host cluster through --kubeconfig, or the
//     in-cluster config, and our own group through the loopback client.
//     Host pods list their claims in the resource.draplane.dev/claims
//     annotation and are placed by node affinity plus removal of the
//     resource.draplane.dev/allocation scheduling gate (podmode.Aggregated);
//   - the serving certificate (when not given with --tls-cert-file) is
//     also valid for <service>.<namespace>.svc, which is the name the
//     aggregator checks, and for every --tls-sans entry.
type AggregatedOptions struct {
	// Mode is ModeStandalone or ModeAggregated.
	Mode string
	// Kubeconfig points at the host cluster; empty means in-cluster.
	// It is also the default of --authentication-kubeconfig and
	// --authorization-kubeconfig.
	Kubeconfig string
	// ServiceName and ServiceNamespace name the Service the APIService
	// points at.
	ServiceName      string
	ServiceNamespace string
	// ExtraSANs are further DNS names or IPs for the serving certificate.
	ExtraSANs []string
	// InjectCABundle makes the server write the CA of its generated
	// serving certificate into spec.caBundle of its APIServices.
	InjectCABundle bool
	// SharedCASecret names a Secret in ServiceNamespace that holds the CA
	// every replica signs its serving certificate with, so that replicas
	// inject one caBundle instead of overwriting each other's.
	SharedCASecret string
	// UpstreamResourceAPI serves resource.k8s.io/v1 beside our group
	// (--serve-resource-k8s-io): on in standalone mode unless turned off,
	// never in aggregated mode, where the host cluster owns that group.
	UpstreamResourceAPI optionalBool
	// DriverServiceAccounts are the service accounts of drivers' pods,
	// each "<namespace>/<name>=<driver>", which the node restriction
	// holds to the node their bound token names (auth/node).
	DriverServiceAccounts []string
	// ScheduleHostPods makes the controllers place the host cluster's own
	// pods whose spec.schedulerName is SchedulerName, with the host's
	// resource.k8s.io/v1 claims (podmode.Cluster), and the views show
	// the host's objects.
	ScheduleHostPods bool
	SchedulerName    string
	// OwnerTaintKey marks the host's devices that are draplane's to
	// allocate; kube-scheduler keeps off them (a NoSchedule device taint).
	OwnerTaintKey string
}

// optionalBool is a boolean flag that knows whether it was given.
type optionalBool struct{ value *bool }

func (b *optionalBool) String() string {
	if b.value == nil {
		return ""
	}
	return strconv.FormatBool(*b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.value = &v
	return nil
}

func (b *optionalBool) Type() string { return "bool" }

// upstreamResourceAPI says whether resource.k8s.io/v1 is served.
func (o *AggregatedOptions) upstreamResourceAPI() bool {
	if o.UpstreamResourceAPI.value != nil {
		return *o.UpstreamResourceAPI.value
	}
	return !o.Aggregated()
}

// NewAggregatedOptions returns the defaults: standalone; the names of
// deploy/.
func NewAggregatedOptions() *AggregatedOptions {
	return &AggregatedOptions{
		Mode:             ModeStandalone,
		ServiceName:      "draplane",
		ServiceNamespace: "draplane-system",
		InjectCABundle:   true,
		SchedulerName:    "draplane",
		OwnerTaintKey:    allocation.DefaultOwnerTaintKey,
	}
}

// AddFlags adds the mode flags.
func (o *AggregatedOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Mode, "mode", o.Mode,
		"standalone: serve core-lite, trust only the data dir's CA. aggregated: run behind a kube-apiserver's APIService with delegated authentication and authorization, core-lite off, controllers working on the host cluster's pods and nodes (--kubeconfig). Never inferred from other flags.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Aggregated mode: kubeconfig of the host cluster for the controllers (pods, nodes, events, leases) and default of --authentication-kubeconfig and --authorization-kubeconfig. Empty: in-cluster config.")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName,
		"Aggregated mode: name of the Service the APIService points at; the serving certificate covers <service-name>.<service-namespace>.svc.")
	fs.StringVar(&o.ServiceNamespace, "service-namespace", o.ServiceNamespace,
		"Aggregated mode: namespace of that Service.")
	fs.StringSliceVar(&o.ExtraSANs, "tls-sans", o.ExtraSANs,
		"Further DNS names or IP addresses for the generated serving certificate.")
	fs.BoolVar(&o.InjectCABundle, "inject-ca-bundle", o.InjectCABundle,
		"Aggregated mode: write the data dir's CA, which signs the generated serving certificate, into spec.caBundle of the APIServices "+strings.Join(APIServiceNames(), " and ")+" at start and every few minutes (needs patch on them in the host cluster). Off with --tls-cert-file (its CA is not known); set it false when the caBundle is managed elsewhere (cert-manager's CA injector, a Secret).")
	fs.StringVar(&o.SharedCASecret, "shared-ca-secret", o.SharedCASecret,
		"Aggregated mode: name of a Secret in --service-namespace holding the CA that signs the generated serving certificate, shared by all replicas (data ca.crt and ca.key). The first replica stores its data dir's CA there; every other one, and every later start, adopts it. Needed with more than one replica, whose caBundle injection would otherwise overwrite each other's; needs get on that Secret and create on Secrets in the host cluster (deploy/ grants both). Not with --tls-cert-file.")
	fs.StringArrayVar(&o.DriverServiceAccounts, "driver-service-account", o.DriverServiceAccounts,
		"Aggregated mode, repeatable: <namespace>/<name>=<driver>. The service account of a DRA driver's pods, node-bound as a node's certificate is in standalone mode: its writes of ResourceSlices (create, update, delete) must carry spec.nodeName of the node its bound token names (extra authentication.kubernetes.io/node-name) and spec.driver one listed for it, and its claim status writes may change only status.devices. Reads stay what the host cluster's RBAC grants.")
	fs.BoolVar(&o.ScheduleHostPods, "schedule-host-pods", o.ScheduleHostPods,
		"Aggregated mode: be a scheduler of the host cluster. The controllers place the host's own pods whose spec.schedulerName is --scheduler-name (every other pod stays kube-scheduler's), allocating the host's resource.k8s.io/v1 claims as kube-scheduler does (allocation and reservedFor in one write, upstream's finalizer) and binding the pods through pods/binding, so that the host's kubelets and DRA drivers prepare them; resourcepools and the device map show the host's slices, claims and pods. Claims of templates stay the host kube-controller-manager's to generate and release. Needs a host that serves resource.k8s.io/v1 (Kubernetes 1.34 or later; DeviceTaintRules from 1.37).")
	fs.StringVar(&o.SchedulerName, "scheduler-name", o.SchedulerName,
		"With --schedule-host-pods: the spec.schedulerName of the pods to place.")
	fs.StringVar(&o.OwnerTaintKey, "owned-device-taint-key", o.OwnerTaintKey,
		"With --schedule-host-pods: draplane allocates only the host's devices that carry a device taint with this key, in their ResourceSlice or from a DeviceTaintRule (effect NoSchedule, so that kube-scheduler, which allocates from the same slices, keeps off them). Two schedulers never hold one device in two claims that way; devices without it are kube-scheduler's.")
	fs.VarPF(&o.UpstreamResourceAPI, "serve-resource-k8s-io", "",
		"Standalone mode: also serve upstream's resource.k8s.io/v1 (DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice, DeviceTaintRule) over the same objects as resource.draplane.dev, for client-go's ResourceV1() and drivers built on k8s.io/dynamic-resource-allocation. Default true standalone; aggregated mode refuses it (the host cluster serves that group).").NoOptDefVal = "true"
}

// APIServiceNames are the host cluster's APIServices of our group, one
// per served version.
func APIServiceNames() []string {
	return []string{resourcev1.SchemeGroupVersion.Version + "." + resourcev1.GroupName, resourcev1beta1.SchemeGroupVersion.Version + "." + resourcev1beta1.GroupName}
}

// Aggregated reports whether aggregated mode is on.
func (o *AggregatedOptions) Aggregated() bool { return o.Mode == ModeAggregated }

// Validate checks the mode flags.
func (o *AggregatedOptions) Validate() []error {
	var errs []error
	if o.Mode != ModeStandalone && o.Mode != ModeAggregated {
		errs = append(errs, fmt.Errorf("--mode must be %s or %s, got %q", ModeStandalone, ModeAggregated, o.Mode))
	}
	if o.Aggregated() && o.upstreamResourceAPI() {
		errs = append(errs, errors.New("--serve-resource-k8s-io cannot be on in aggregated mode: the host cluster serves resource.k8s.io"))
	}
	if o.SharedCASecret != "" && !o.Aggregated() {
		errs = append(errs, errors.New("--shared-ca-secret is for aggregated mode (a Secret of the host cluster)"))
	}
	if _, err := o.driverServiceAccounts(); err != nil {
		errs = append(errs, err)
	}
	if len(o.DriverServiceAccounts) > 0 && !o.Aggregated() {
		errs = append(errs, errors.New("--driver-service-account is for aggregated mode; standalone drivers get node identities from client-kubeconfig"))
	}
	if o.ScheduleHostPods && !o.Aggregated() {
		errs = append(errs, errors.New("--schedule-host-pods is for aggregated mode: standalone places its own pods already"))
	}
	if msgs := validation.IsQualifiedName(o.OwnerTaintKey); o.ScheduleHostPods && len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--owned-device-taint-key %q: %s", o.OwnerTaintKey, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(o.SchedulerName); o.ScheduleHostPods && len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--scheduler-name %q: %s", o.SchedulerName, strings.Join(msgs, "; ")))
	}
	if o.Aggregated() && (o.ServiceName == "" || o.ServiceNamespace == "") {
		errs = append(errs, errors.New("aggregated mode needs --service-name and --service-namespace (the aggregator checks the serving certificate for <service>.<namespace>.svc)"))
	}
	return errs
}

// complete turns aggregated mode into settings of the other options. It
// runs before Options.Complete fills in standalone defaults.
func (o *AggregatedOptions) complete(opts *Options) {
	if !o.Aggregated() {
		return
	}
	opts.CoreLite = false
	// The simulator makes nodes in core-lite; there is none.
	opts.Simulator = NewSimulatorOptions()
	// Ask the host: TokenReview, SubjectAccessReview, and the
	// extension-apiserver-authentication ConfigMap for the client CAs.
	opts.Authentication.RemoteKubeConfigFileOptional = false
	opts.Authentication.SkipInClusterLookup = false
	opts.Authorization.RemoteKubeConfigFileOptional = false
	if opts.Authentication.RemoteKubeConfigFile == "" {
		opts.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	}
	if opts.Authorization.RemoteKubeConfigFile == "" {
		opts.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	}
}

// servingNames adds the Service names and --tls-sans to the names of the
// generated serving certificate.
func (o *AggregatedOptions) servingNames(dnsNames []string, ips []net.IP) ([]string, []net.IP) {
	if o.ServiceName != "" && o.ServiceNamespace != "" && o.Aggregated() {
		svc := o.ServiceName + "." + o.ServiceNamespace
		dnsNames = append(dnsNames, o.ServiceName, svc, svc+".svc", svc+".svc.cluster.local")
	}
	for _, san := range o.ExtraSANs {
		if ip := net.ParseIP(san); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		} else if san != "" && !slices.Contains(dnsNames, san) {
			dnsNames = append(dnsNames, san)
		}
	}
	return dnsNames, ips
}

// hostConfig is the client config of the host cluster.
func (o *AggregatedOptions) hostConfig() (*rest.Config, error) {
	if o.Kubeconfig == "" {
		config, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("aggregated mode: no --kubeconfig and no in-cluster config: %w", err)
		}
		return config, nil
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("aggregated mode: --kubeconfig %s: %w", o.Kubeconfig, err)
	}
	return config, nil
}

// podMode is how the controllers write into pods in this mode.
func (o *AggregatedOptions) podMode() podmode.Mode {
	if o.ScheduleHostPods && o.Aggregated() {
		return podmode.Cluster{SchedulerName: o.SchedulerName}
	}
	if o.Aggregated() {
		return podmode.Aggregated
	}
	return podmode.Standalone
}

// hostNamespaces reads the host cluster's namespaces in aggregated mode
// (nil otherwise): their admin access label decides where claims may ask
// for admin access to devices.
func (o *AggregatedOptions) hostNamespaces() (typedcorev1.NamespaceInterface, error) {
	if !o.Aggregated() {
		return nil, nil
	}
	host, err := o.hostConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(host)
	if err != nil {
		return nil, fmt.Errorf("aggregated mode: host client for namespaces: %w", err)
	}
	return client.CoreV1().Namespaces(), nil
}

// driverServiceAccounts parses --driver-service-account into the service
// accounts' user names and their drivers.
func (o *AggregatedOptions) driverServiceAccounts() (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range o.DriverServiceAccounts {
		account, driverName, ok := strings.Cut(v, "=")
		namespace, name, okName := strings.Cut(account, "/")
		if !ok || !okName || namespace == "" || name == "" || driverName == "" {
			return nil, fmt.Errorf("--driver-service-account %q must be <namespace>/<name>=<driver>", v)
		}
		if msgs := validation.IsDNS1123Subdomain(driverName); len(msgs) > 0 {
			return nil, fmt.Errorf("--driver-service-account %q: driver %q: %s", v, driverName, strings.Join(msgs, "; "))
		}
		user := serviceaccount.MakeUsername(namespace, name)
		out[user] = append(out[user], driverName)
	}
	return out, nil
}
