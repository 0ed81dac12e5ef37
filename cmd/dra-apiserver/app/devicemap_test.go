package app

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestDeviceMapFlag(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		aggregated bool
		want       bool
	}{
		{name: "standalone default", want: true},
		{name: "aggregated default", aggregated: true, want: false},
		{name: "aggregated asked for", args: []string{"--device-map"}, aggregated: true, want: true},
		{name: "standalone turned off", args: []string{"--device-map=false"}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &DeviceMapOptions{}
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := o.enabled(tc.aggregated); got != tc.want {
				t.Errorf("enabled = %v, want %v", got, tc.want)
			}
		})
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	(&DeviceMapOptions{}).AddFlags(fs)
	if err := fs.Parse([]string{"--device-map=maybe"}); err == nil {
		t.Error("--device-map=maybe was accepted")
	}
}
