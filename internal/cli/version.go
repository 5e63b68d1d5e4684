package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/buildinfo"
)

// newVersionCommand builds `latch version`, which `latch --version` also prints.
func newVersionCommand(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go toolchain latch was built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(env.Out, buildinfo.Read())
			return nil
		},
	}
}
