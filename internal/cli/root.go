// Package cli owns latch's command line. Cobra commands parse flags and arguments into
// Configs and call the server, a gRPC client of the authzed.api.v1 services, or the
// validation-file runner; no command decides anything about permissions itself.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/buildinfo"
)

// Env is what commands read and write. Main passes the process's; tests pass buffers
// and a fake environment.
type Env struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads environment variables (LATCH_ENDPOINT, LATCH_TOKEN, ...).
	Getenv func(string) string
}

// OSEnv is the process's own standard streams and environment.
func OSEnv() Env {
	return Env{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv}
}

// exitCode is an error that only sets the process's exit status: the command has
// already said everything it had to say.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs the command line args (without the program name) and returns the
// process exit status: 0 on success, 1 on any error or failure. Errors are printed
// to env.Err as one line, without stack traces.
func Main(ctx context.Context, args []string, env Env) int {
	root := NewRootCommand(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(env.Err, "latch: "+err.Error())
	return 1
}

// NewRootCommand builds the `latch` command tree writing to env.
func NewRootCommand(env Env) *cobra.Command {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	root := &cobra.Command{
		Use:   "latch",
		Short: "latch is a relationship-based permissions database, wire-compatible with SpiceDB",
		Long: `latch stores relationships (document:readme#viewer@user:alice), compiles a schema that
turns them into permissions, and answers permission checks over SpiceDB's authzed.api.v1
gRPC API and its HTTP/JSON gateway.

Client commands (schema, relationship, check) talk to a running server: point them at it
with --endpoint or LATCH_ENDPOINT, and authenticate with --token or LATCH_TOKEN.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().Version,
	}
	root.SetVersionTemplate(buildinfo.Read().String())
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	root.AddCommand(
		newServeCommand(env),
		newSchemaCommand(env),
		newRelationshipCommand(env),
		newCheckCommand(env),
		newValidateCommand(env),
		newDatastoreCommand(env),
		newLookupResourcesCommand(env),
		newLookupSubjectsCommand(env),
		newExpandCommand(env),
		newImportCommand(env),
		newExportCommand(env),
		newWatchCommand(env),
		newBenchCommand(env),
		newVersionCommand(env),
	)
	return root
}
