package app

import (
	"os"
	"path/filepath"
	"runtime/debug"
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
		"no gc percent":         {mutate: func(o *Options) { o.GCPercent = 0 }, wantErr: "--gc-percent"},
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

func TestApplyGCPercent(t *testing.T) {
	initial := debug.SetGCPercent(100)
	defer debug.SetGCPercent(initial)
	tests := []struct {
		name     string
		gogc     string // "": GOGC unset
		flag     []string
		want     int
		keepsOwn bool // the runtime's target before the call stays
	}{
		{name: "default", want: DefaultGCPercent},
		{name: "flag", flag: []string{"--gc-percent=120"}, want: 120},
		{name: "GOGC set", gogc: "150", keepsOwn: true},
		{name: "GOGC set and flag", gogc: "150", flag: []string{"--gc-percent=300"}, want: 300},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gogc != "" {
				t.Setenv("GOGC", tc.gogc)
			} else {
				// t.Setenv restores GOGC after the test; unset it meanwhile.
				t.Setenv("GOGC", "")
				if err := os.Unsetenv("GOGC"); err != nil {
					t.Fatal(err)
				}
			}
			// The runtime read GOGC when the process started; stand in
			// for that with a target the options never choose.
			debug.SetGCPercent(77)
			o := NewOptions()
			fss := o.Flags()
			fs := fss.FlagSet("generic")
			if err := fs.Parse(tc.flag); err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.keepsOwn {
				want = 77
			}
			if got := o.ApplyGCPercent(fs.Changed("gc-percent")); got != want {
				t.Errorf("ApplyGCPercent = %d, want %d", got, want)
			}
			if got := debug.SetGCPercent(100); got != want {
				t.Errorf("runtime target %d, want %d", got, want)
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
