package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/spf13/cobra"
)

func newSchemaCommand(env Env) *cobra.Command {
	var flags clientFlags
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Write or read the schema of a running server",
	}
	addClientFlags(cmd, &flags)
	cmd.AddCommand(
		&cobra.Command{
			Use:   "write FILE",
			Short: "Replace the server's schema with the one in FILE (- reads standard input)",
			Long: `Replace the server's schema with the one in FILE (- reads standard input).
Prints the ZedToken of the write, which --consistency at-least:ZEDTOKEN accepts.`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := flags.resolve(cmd, env)
				if err != nil {
					return err
				}
				text, err := readInput(args[0], env)
				if err != nil {
					return err
				}
				return writeSchema(cmd, cfg, text, env)
			},
		},
		&cobra.Command{
			Use:   "read",
			Short: "Print the server's schema",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cfg, err := flags.resolve(cmd, env)
				if err != nil {
					return err
				}
				return readSchema(cmd, cfg, env)
			},
		},
	)
	return cmd
}

// readInput reads a file, or standard input for "-".
func readInput(name string, env Env) (string, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(env.In)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	return string(b), nil
}

func writeSchema(cmd *cobra.Command, cfg ClientConfig, text string, env Env) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.WriteSchema(cmd.Context(), &v1.WriteSchemaRequest{Schema: text})
	if err != nil {
		return c.fail("writing schema", err)
	}
	fmt.Fprintln(env.Out, resp.GetWrittenAt().GetToken())
	return nil
}

func readSchema(cmd *cobra.Command, cfg ClientConfig, env Env) error {
	c, err := dial(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.ReadSchema(cmd.Context(), &v1.ReadSchemaRequest{})
	if err != nil {
		return c.fail("reading schema", err)
	}
	text := resp.GetSchemaText()
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	fmt.Fprint(env.Out, text)
	return nil
}
