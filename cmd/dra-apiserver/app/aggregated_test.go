package app

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestAggregatedOptions(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
		check   func(t *testing.T, o *Options)
	}{
		"standalone by default": {
			check: func(t *testing.T, o *Options) {
				if !o.CoreLite || o.Aggregated.Aggregated() {
					t.Errorf("expected standalone with core-lite, got mode %q core-lite %v", o.Aggregated.Mode, o.CoreLite)
				}
				if o.Authentication.ClientCert.ClientCA != filepath.Join(o.DataDir, "pki", "ca.crt") {
					t.Errorf("standalone trusts the data dir's CA, got %q", o.Authentication.ClientCert.ClientCA)
				}
			},
		},
		"delegated-auth flags do not switch modes": {
			args: []string{"--authentication-kubeconfig=/host.kubeconfig"},
			check: func(t *testing.T, o *Options) {
				if !o.CoreLite || o.Aggregated.Aggregated() {
					t.Error("mode must not be inferred")
				}
			},
		},
		"aggregated": {
			args: []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig"},
			check: func(t *testing.T, o *Options) {
				if o.CoreLite {
					t.Error("core-lite must be off")
				}
				if o.Authentication.RemoteKubeConfigFile != "/host.kubeconfig" || o.Authorization.RemoteKubeConfigFile != "/host.kubeconfig" {
					t.Errorf("authn/authz kubeconfigs must default to --kubeconfig, got %q and %q",
						o.Authentication.RemoteKubeConfigFile, o.Authorization.RemoteKubeConfigFile)
				}
				if o.Authentication.RemoteKubeConfigFileOptional || o.Authorization.RemoteKubeConfigFileOptional || o.Authentication.SkipInClusterLookup {
					t.Error("aggregated mode must ask the host")
				}
				if o.Authentication.ClientCert.ClientCA != "" {
					t.Errorf("aggregated mode takes the host's client CA, got %q", o.Authentication.ClientCert.ClientCA)
				}
			},
		},
		"explicit authn kubeconfig wins": {
			args: []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig", "--authentication-kubeconfig=/authn.kubeconfig"},
			check: func(t *testing.T, o *Options) {
				if o.Authentication.RemoteKubeConfigFile != "/authn.kubeconfig" {
					t.Errorf("got %q", o.Authentication.RemoteKubeConfigFile)
				}
			},
		},
		"client budget standalone": {
			check: func(t *testing.T, o *Options) {
				if o.Controllers.ClientQPS != DefaultControllerClientQPS || o.Controllers.ClientBurst != DefaultControllerClientBurst {
					t.Errorf("controllers' client budget %v/%d, want %d/%d", o.Controllers.ClientQPS, o.Controllers.ClientBurst, DefaultControllerClientQPS, DefaultControllerClientBurst)
				}
			},
		},
		"client budget aggregated": {
			args: []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig"},
			check: func(t *testing.T, o *Options) {
				if o.Controllers.ClientQPS != DefaultAggregatedControllerClientQPS || o.Controllers.ClientBurst != DefaultAggregatedControllerClientBurst {
					t.Errorf("controllers' client budget %v/%d, want %d/%d", o.Controllers.ClientQPS, o.Controllers.ClientBurst, DefaultAggregatedControllerClientQPS, DefaultAggregatedControllerClientBurst)
				}
			},
		},
		"client budget given": {
			args: []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig", "--controller-client-qps=70", "--controller-client-burst=90"},
			check: func(t *testing.T, o *Options) {
				if o.Controllers.ClientQPS != 70 || o.Controllers.ClientBurst != 90 {
					t.Errorf("controllers' client budget %v/%d, want 70/90", o.Controllers.ClientQPS, o.Controllers.ClientBurst)
				}
			},
		},
		"resource.k8s.io standalone": {
			check: func(t *testing.T, o *Options) {
				if !o.Aggregated.upstreamResourceAPI() {
					t.Error("standalone serves resource.k8s.io by default")
				}
			},
		},
		"resource.k8s.io switched off": {
			args: []string{"--serve-resource-k8s-io=false"},
			check: func(t *testing.T, o *Options) {
				if o.Aggregated.upstreamResourceAPI() {
					t.Error("--serve-resource-k8s-io=false must turn resource.k8s.io off")
				}
			},
		},
		"resource.k8s.io off aggregated": {
			args: []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig"},
			check: func(t *testing.T, o *Options) {
				if o.Aggregated.upstreamResourceAPI() {
					t.Error("aggregated mode must not serve resource.k8s.io: the host does")
				}
			},
		},
		"resource.k8s.io refused aggregated": {
			args:    []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig", "--serve-resource-k8s-io"},
			wantErr: "--serve-resource-k8s-io cannot be on in aggregated mode",
		},
		"negative client budget": {args: []string{"--controller-client-qps=-1"}, wantErr: "--controller-client-qps"},
		"unknown mode":           {args: []string{"--mode=cluster"}, wantErr: "--mode must be"},
		"shared CA standalone":   {args: []string{"--shared-ca-secret=draplane-ca"}, wantErr: "--shared-ca-secret is for aggregated mode"},
		"shared CA with a given certificate": {
			args:    []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig", "--shared-ca-secret=draplane-ca", "--tls-cert-file=/s.crt", "--tls-private-key-file=/s.key"},
			wantErr: "--shared-ca-secret cannot be used with --tls-cert-file",
		},
		"no service name": {args: []string{"--mode=aggregated", "--service-name="}, wantErr: "--service-name"},
		"driver service accounts": {
			args: []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig",
				"--driver-service-account=dra/gpu-driver=gpu.example.com", "--driver-service-account=dra/gpu-driver=nic.example.com"},
			check: func(t *testing.T, o *Options) {
				got, err := o.Aggregated.driverServiceAccounts()
				if err != nil || !slices.Equal(got["system:serviceaccount:dra:gpu-driver"], []string{"gpu.example.com", "nic.example.com"}) {
					t.Errorf("driver service accounts %v, %v", got, err)
				}
			},
		},
		"driver service account malformed": {
			args:    []string{"--mode=aggregated", "--kubeconfig=/host.kubeconfig", "--driver-service-account=gpu-driver=gpu.example.com"},
			wantErr: "must be <namespace>/<name>=<driver>",
		},
		"driver service account standalone": {
			args: []string{"--driver-service-account=dra/gpu-driver=gpu.example.com"}, wantErr: "--driver-service-account is for aggregated mode",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			all := pflag.NewFlagSet("test", pflag.ContinueOnError)
			for _, set := range o.Flags().FlagSets {
				all.AddFlagSet(set)
			}
			if err := all.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.DataDir = t.TempDir()
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one about %s", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestAggregatedServingNames(t *testing.T) {
	tests := map[string]struct {
		mode, svc, ns string
		sans          []string
		wantDNS       []string
		wantIPs       []string
	}{
		"standalone: no service names": {mode: ModeStandalone, svc: "draplane", ns: "draplane-system", wantDNS: []string{"localhost"}, wantIPs: []string{"127.0.0.1"}},
		"aggregated: service names": {mode: ModeAggregated, svc: "api", ns: "dra",
			wantDNS: []string{"localhost", "api", "api.dra", "api.dra.svc", "api.dra.svc.cluster.local"}, wantIPs: []string{"127.0.0.1"}},
		"extra SANs": {mode: ModeStandalone, sans: []string{"dra.example.com", "10.0.0.7", "localhost"},
			wantDNS: []string{"localhost", "dra.example.com"}, wantIPs: []string{"127.0.0.1", "10.0.0.7"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := &AggregatedOptions{Mode: tc.mode, ServiceName: tc.svc, ServiceNamespace: tc.ns, ExtraSANs: tc.sans}
			dns, ips := o.servingNames([]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
			if !slices.Equal(dns, tc.wantDNS) {
				t.Errorf("DNS names: got %v, want %v", dns, tc.wantDNS)
			}
			var gotIPs []string
			for _, ip := range ips {
				gotIPs = append(gotIPs, ip.String())
			}
			if !slices.Equal(gotIPs, tc.wantIPs) {
				t.Errorf("IPs: got %v, want %v", gotIPs, tc.wantIPs)
			}
		})
	}
}

func TestCABundleConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "host.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: host, cluster: {server: "https://host.example:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: host, context: {cluster: host, user: u}}]
current-context: host
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args []string
		// generated: the server signs its own serving certificate.
		generated bool
		want      bool
	}{
		"aggregated":                    {args: []string{"--mode=aggregated", "--kubeconfig=" + kubeconfig}, generated: true, want: true},
		"aggregated, turned off":        {args: []string{"--mode=aggregated", "--kubeconfig=" + kubeconfig, "--inject-ca-bundle=false"}, generated: true},
		"aggregated, --tls-cert-file":   {args: []string{"--mode=aggregated", "--kubeconfig=" + kubeconfig}},
		"standalone has no APIServices": {generated: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			all := pflag.NewFlagSet("test", pflag.ContinueOnError)
			for _, set := range o.Flags().FlagSets {
				all.AddFlagSet(set)
			}
			if err := all.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.DataDir = t.TempDir()
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			got, err := o.caBundleConfig(tc.generated)
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.want {
				t.Fatalf("caBundle config %+v, want one: %v", got, tc.want)
			}
			if got == nil {
				return
			}
			if got.Host.Host != "https://host.example:6443" {
				t.Errorf("host config %q, want the --kubeconfig cluster", got.Host.Host)
			}
			if want := []string{"v1.resource.draplane.dev", "v1beta1.resource.draplane.dev"}; !slices.Equal(got.APIServices, want) {
				t.Errorf("APIServices %v, want %v", got.APIServices, want)
			}
			if got.CAFile != filepath.Join(o.DataDir, "pki", "ca.crt") {
				t.Errorf("CA file %q, want the data dir's CA", got.CAFile)
			}
		})
	}
}
