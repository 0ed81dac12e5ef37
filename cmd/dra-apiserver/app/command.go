package app

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	genericapiserver "k8s.io/apiserver/pkg/server"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
)

// NewCommand returns the dra-apiserver command with its grouped flags and
// the version subcommand.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "dra-apiserver",
		Short: "A Dynamic Resource Allocation control plane",
		Long: `dra-apiserver serves resource.draplane.dev (DeviceClasses, ResourceClaims,
ResourceClaimTemplates, ResourceSlices, DeviceTaintRules) and, standalone,
enough of core/v1 for pods to use them.

With no flags it runs standalone: an embedded etcd, a CA and an admin
kubeconfig in --data-dir, serving on https://127.0.0.1:6444.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			verflag.PrintAndExitIfRequested()
			if err := logsapi.ValidateAndApply(o.Logs, nil); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			ctx := genericapiserver.SetupSignalContext()
			ctx = klog.NewContext(ctx, klog.Background())
			klog.FromContext(ctx).V(2).Info("Garbage collector target", "gcPercent", o.ApplyGCPercent(cmd.Flags().Changed("gc-percent")))
			cfg, err := o.Config(ctx)
			if err != nil {
				return err
			}
			srv, err := cfg.Complete().New()
			if err != nil {
				cfg.Close()
				return err
			}
			return srv.Run(ctx)
		},
	}

	fss := o.Flags()
	global := fss.FlagSet("global")
	verflag.AddFlags(global)
	globalflag.AddGlobalFlags(global, cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cliflag.SetUsageAndHelpFunc(cmd, fss, terminalColumns())

	cmd.AddCommand(newVersionCommand(), newNodeAgentCommand(), newClientKubeconfigCommand())
	return cmd
}

// terminalColumns is the width help text is wrapped to: the terminal's,
// or none when stdout is not one.
func terminalColumns() int {
	if !term.IsTerminal(int(os.Stdout.Fd())) {
		return 0
	}
	cols, _, _ := term.GetSize(int(os.Stdout.Fd()))
	return cols
}

// setSubcommandFlags adds a subcommand's flag sets to it and gives it a
// help and usage of its own, which show those flags only. Without it the
// subcommand inherits the root's, which show the server's flags.
func setSubcommandFlags(cmd *cobra.Command, fss cliflag.NamedFlagSets) {
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cliflag.SetUsageAndHelpFunc(cmd, fss, terminalColumns())
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of dra-apiserver",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := version.Get()
			switch output {
			case "":
				fmt.Fprintf(cmd.OutOrStdout(), "dra-apiserver %s (commit %s, built %s, %s)\n",
					info.GitVersion, info.GitCommit, info.BuildDate, info.GoVersion)
			case "json":
				data, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(data))
			default:
				return fmt.Errorf("--output must be empty or json, got %q", output)
			}
			return nil
		},
	}
	var fss cliflag.NamedFlagSets
	fss.FlagSet("version").StringVarP(&output, "output", "o", "", "Output format: empty for one line, or json.")
	setSubcommandFlags(cmd, fss)
	return cmd
}
