package app

import (
	"strconv"

	"github.com/spf13/pflag"
)

// DeviceMapOptions say whether the server serves the device map page at
// /devicemap/: on standalone, off in aggregated mode unless --device-map
// asks for it.
type DeviceMapOptions struct {
	// Enabled is the flag's value; Set says whether it was given.
	Enabled, Set bool
}

// AddFlags adds --device-map.
func (o *DeviceMapOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Var(deviceMapFlag{o}, "device-map",
		"Serve a live map of nodes and devices at /devicemap/ on the secure port, behind the API's authentication and authorization (non-resource path). Default: on standalone, off in aggregated mode.")
	fs.Lookup("device-map").NoOptDefVal = "true"
}

// enabled is the flag's value, or the mode's default.
func (o *DeviceMapOptions) enabled(aggregated bool) bool {
	if o.Set {
		return o.Enabled
	}
	return !aggregated
}

type deviceMapFlag struct{ o *DeviceMapOptions }

func (f deviceMapFlag) String() string {
	if f.o == nil || !f.o.Set {
		return "auto"
	}
	return strconv.FormatBool(f.o.Enabled)
}

func (f deviceMapFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	f.o.Enabled, f.o.Set = v, true
	return nil
}

func (f deviceMapFlag) Type() string { return "bool" }
