package app

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

func TestDefaultDataDir(t *testing.T) {
	tests := map[string]struct {
		xdg, home string
		want      string
	}{
		"XDG_STATE_HOME":          {xdg: "/state", home: "/home/u", want: "/state/draplane"},
		"relative XDG is ignored": {xdg: "state", home: "/home/u", want: "/home/u/.local/state/draplane"},
		"home":                    {home: "/home/u", want: "/home/u/.local/state/draplane"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", tc.xdg)
			t.Setenv("HOME", tc.home)
			got, err := DefaultDataDir()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := map[string]struct {
		mutate  func(*Options)
		wantErr string
	}{
		"defaults":              {mutate: func(*Options) {}},
		"external etcd":         {mutate: func(o *Options) { o.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"} }},
		"bad quota":             {mutate: func(o *Options) { o.EmbeddedEtcd.QuotaBackendBytes = 0 }, wantErr: "quota-backend-bytes"},
		"bad etcd log level":    {mutate: func(o *Options) { o.EmbeddedEtcd.LogLevel = "chatty" }, wantErr: "embedded-etcd-log-level"},
		"bad storage media":     {mutate: func(o *Options) { o.Etcd.DefaultStorageMediaType = "text/plain" }, wantErr: "storage-media-type"},
		"port out of range":     {mutate: func(o *Options) { o.SecureServing.BindPort = 70000 }, wantErr: "secure-port"},
		"no binding timeout":    {mutate: func(o *Options) { o.Controllers.BindingTimeout = 0 }, wantErr: "--device-binding-timeout"},
		"negative client qps":   {mutate: func(o *Options) { o.Controllers.ClientQPS = -1 }, wantErr: "--controller-client-qps"},
		"negative client burst": {mutate: func(o *Options) { o.Controllers.ClientBurst = -1 }, wantErr: "--controller-client-burst"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			o.DataDir = t.TempDir()
			tc.mutate(o)
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one about %s", err, tc.wantErr)
			}
		})
	}
}

func TestCompleteUsesTheDataDirCA(t *testing.T) {
	o := NewOptions()
	o.DataDir = t.TempDir()
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(o.DataDir, "pki", "ca.crt"); o.Authentication.ClientCert.ClientCA != want {
		t.Errorf("client CA %q, want %q", o.Authentication.ClientCert.ClientCA, want)
	}
}

// TestWatchCacheDefaults: events and claims have no watch cache and the
// watch cache keeps no snapshots, unless the flags say otherwise.
func TestWatchCacheDefaults(t *testing.T) {
	tests := map[string]struct {
		args          []string
		wantSnapshots bool
		wantSizes     []string
	}{
		"defaults":      {wantSizes: []string{"events#0", "resourceclaims.resource.draplane.dev#0", "pods#0"}},
		"snapshots on":  {args: []string{"--feature-gates=ListFromCacheSnapshot=true"}, wantSnapshots: true, wantSizes: []string{"events#0", "resourceclaims.resource.draplane.dev#0", "pods#0"}},
		"sizes replace": {args: []string{"--watch-cache-sizes=events#0"}, wantSizes: []string{"events#0"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			for _, f := range o.Flags().FlagSets {
				fs.AddFlagSet(f)
			}
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := utilfeature.DefaultFeatureGate.Enabled(genericfeatures.ListFromCacheSnapshot); got != tc.wantSnapshots {
				t.Errorf("ListFromCacheSnapshot = %v, want %v", got, tc.wantSnapshots)
			}
			if !slices.Equal(o.Etcd.WatchCacheSizes, tc.wantSizes) {
				t.Errorf("watch cache sizes %q, want %q", o.Etcd.WatchCacheSizes, tc.wantSizes)
			}
		})
	}
	NewOptions() // back to the defaults for the other tests
}
