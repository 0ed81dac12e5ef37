package app

import (
	"fmt"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/draplane/draplane/internal/server/pki"
)

// newClientKubeconfigCommand is `dra-apiserver client-kubeconfig`: a
// kubeconfig for a named user and groups, signed by the data dir's CA.
func newClientKubeconfigCommand() *cobra.Command {
	k := pki.ClientKubeconfig{}
	cmd := &cobra.Command{
		Use:   "client-kubeconfig",
		Short: "Write a kubeconfig for a user and groups, signed by the data dir's client CA",
		Long: `client-kubeconfig signs a client certificate for --user (its CommonName) and
each --group (its Organizations) with the CA in the data directory, which a
standalone dra-apiserver on that directory trusts, and writes a kubeconfig
with it to --output. What the user may do is what RBAC bindings to the user
or its groups grant (see kubectl create rolebinding). A node-bound driver
is user draplane:node:<node> in group draplane:nodes, and one group
draplane:driver:<driver> for each driver it may publish ResourceSlices of.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if k.DataDir == "" {
				dir, err := DefaultDataDir()
				if err != nil {
					return err
				}
				k.DataDir = dir
			}
			if k.Path == "" {
				return fmt.Errorf("--output is required")
			}
			if err := pki.MintClientKubeconfig(k); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s for user %q, groups %q\n", k.Path, k.User, k.Groups)
			return nil
		},
	}
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("client kubeconfig")
	fs.StringVar(&k.DataDir, "data-dir", "", "data directory of the server whose CA signs (default: the server's default data dir)")
	fs.StringVar(&k.User, "user", "", "user name (the certificate's CommonName; required)")
	fs.StringSliceVar(&k.Groups, "group", nil, "group, repeatable (the certificate's Organizations)")
	fs.StringVar(&k.ServerURL, "server", "", "server URL (default: the one in the data dir's admin.kubeconfig)")
	fs.StringVarP(&k.Path, "output", "o", "", "kubeconfig file to write (required)")
	setSubcommandFlags(cmd, fss)
	return cmd
}
