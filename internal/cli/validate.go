package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/validationfile"
)

func newValidateCommand(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE.yaml...",
		Short: "Run validation files in-process and report every failing assertion",
		Long: `Run validation files in-process: compile each file's schema, load its relationships
into a fresh in-memory store and evaluate its assertions, without a server.

A validation file is SpiceDB's YAML format:

  schema: |-
    definition user {}
    definition document {
      relation viewer: user
      permission view = viewer
    }
  relationships: |-
    document:readme#viewer@user:alice
  assertions:
    assertTrue:
      - document:readme#view@user:alice
    assertFalse:
      - document:readme#view@user:bob
    assertCaveated: []

"schemaFile: FILE.zed" may replace "schema" (a path relative to the YAML file, inside its
directory). An assertion may end with ' with {json}' to give caveat context. SpiceDB's
"validation" section (expected relations) is not supported yet: a file that has one fails
with a message saying so rather than passing unchecked.

Every problem and failing assertion is printed as FILE:LINE: message. The exit status
is 1 if any file has a problem or a failing assertion, 0 otherwise.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			for _, path := range args {
				if !validateFile(cmd.Context(), path, env.Out) {
					failed = true
				}
			}
			if failed {
				return exitCode(1)
			}
			return nil
		},
	}
}

// validateFile runs one file, prints its outcome and reports whether it passed.
func validateFile(ctx context.Context, path string, out io.Writer) bool {
	if isPermify, passed := validatePermifyFile(ctx, path, out); isPermify {
		return passed
	}
	f, err := validationfile.Load(path)
	if err == nil {
		var rep validationfile.Report
		rep, err = validationfile.Run(ctx, f)
		if err == nil {
			return printReport(out, rep)
		}
	}
	var probs *validationfile.ProblemsError
	if errors.As(err, &probs) {
		for _, p := range probs.Problems {
			fmt.Fprintln(out, p.String())
		}
		fmt.Fprintf(out, "%s: not run: %s\n", path, plural(len(probs.Problems), "problem"))
		return false
	}
	fmt.Fprintf(out, "%s: %v\n", path, err)
	return false
}

func printReport(out io.Writer, rep validationfile.Report) bool {
	for _, f := range rep.Failures {
		fmt.Fprintln(out, f.String())
	}
	for _, u := range rep.Unchecked {
		fmt.Fprintf(out, "%s: %s\n", rep.File, u)
	}
	switch {
	case len(rep.Failures) > 0:
		fmt.Fprintf(out, "%s: %d of %s failed\n", rep.File, len(rep.Failures), plural(rep.Checked, "assertion"))
	case len(rep.Unchecked) > 0:
		fmt.Fprintf(out, "%s: %s held, but part of the file was not checked\n", rep.File, plural(rep.Checked, "assertion"))
	default:
		fmt.Fprintf(out, "%s: %s held\n", rep.File, plural(rep.Checked, "assertion"))
	}
	return rep.OK()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
