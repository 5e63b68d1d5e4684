package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/latch-authz/latch/internal/validationfile"
)

func newValidateCommand(env Env) *cobra.Command {
	var update bool
	cmd := &cobra.Command{
		Use:   "validate FILE.yaml...",
		Short: "Run validation files in-process and report every failing assertion and expected relation",
		Long: `Run validation files in-process: compile each file's schema, load its relationships
into a fresh in-memory store, evaluate its assertions and compute its expected relations,
without a server.

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
  validation:
    document:readme#view:
      - "[user:alice] is <document:readme#viewer>"

"schemaFile: FILE.zed" may replace "schema" (a path relative to the YAML file, inside its
directory). An assertion may end with ' with {json}' to give caveat context. The
"validation" section lists, for each resource#permission, every subject its expansion
reaches and the relations that name it, as zed does: subject sets are listed as subjects
("[group:eng#member]"), wildcards with what they exclude ("[user:* - {user:bob}]"),
caveated subjects with "[...]" ("[user:tom[...]]"). With --update the section is rewritten
from the actual answers (entries and subjects sorted, as zed's tooling writes them) and
every other byte of the file is kept.

Permify's validation format (schema, relationships, attributes, scenarios with checks,
entity_filters and subject_filters) is recognised and run too.

Every problem and failure is printed as FILE:LINE: what was expected, what was found.
The exit status is 1 if any file has a problem or a failure, 0 otherwise.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			for _, path := range args {
				if !validateFile(cmd.Context(), path, update, env.Out) {
					failed = true
				}
			}
			if failed {
				return exitCode(1)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&update, "update", false, "rewrite each file's validation section (expected relations) from the actual answers")
	return cmd
}

// validateFile runs one file, prints its outcome and reports whether it passed. With
// update, the file's validation section is rewritten instead of compared.
func validateFile(ctx context.Context, path string, update bool, out io.Writer) bool {
	if isPermify, passed := validatePermifyFile(ctx, path, update, out); isPermify {
		return passed
	}
	f, err := validationfile.Load(path)
	if err == nil {
		var rep validationfile.Report
		rep, err = validationfile.Run(ctx, f)
		if err == nil && update {
			return updateFile(path, rep, out)
		}
		if err == nil {
			return printReport(out, rep)
		}
	}
	printProblems(out, path, err)
	return false
}

// printProblems prints why a file could not be run.
func printProblems(out io.Writer, path string, err error) {
	var probs *validationfile.ProblemsError
	if errors.As(err, &probs) {
		for _, p := range probs.Problems {
			fmt.Fprintln(out, p.String())
		}
		fmt.Fprintf(out, "%s: not run: %s\n", path, plural(len(probs.Problems), "problem"))
		return
	}
	fmt.Fprintf(out, "%s: %v\n", path, err)
}

func printReport(out io.Writer, rep validationfile.Report) bool {
	for _, f := range rep.Failures {
		fmt.Fprintln(out, f.String())
	}
	checked := plural(len(rep.Assertions), "assertion")
	if len(rep.Relations) > 0 {
		checked += " and " + plural(len(rep.Relations), "expected relation")
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(out, "%s: %s (%s checked)\n", rep.File, plural(len(rep.Failures), "failure"), checked)
		return false
	}
	fmt.Fprintf(out, "%s: %s held\n", rep.File, checked)
	return true
}

// updateFile rewrites the validation section of path from rep and reports the
// assertions, which --update does not change.
func updateFile(path string, rep validationfile.Report, out io.Writer) bool {
	src, err := os.ReadFile(path)
	var updated []byte
	if err == nil {
		updated, err = validationfile.UpdateValidation(src, rep.Relations)
	}
	var info os.FileInfo
	if err == nil && !bytes.Equal(src, updated) {
		if info, err = os.Stat(path); err == nil {
			err = os.WriteFile(path, updated, info.Mode().Perm())
		}
	}
	if err != nil {
		fmt.Fprintf(out, "%s: not updated: %v\n", path, err)
		return false
	}
	switch {
	case len(rep.Relations) == 0:
		fmt.Fprintf(out, "%s: no validation section to update\n", path)
	case bytes.Equal(src, updated):
		fmt.Fprintf(out, "%s: validation section already up to date\n", path)
	default:
		fmt.Fprintf(out, "%s: validation section updated (%s)\n", path, plural(len(rep.Relations), "expected relation"))
	}
	ok := true
	for _, a := range rep.Assertions {
		if !a.OK() {
			fmt.Fprintln(out, a.Failure(rep.File).String())
			ok = false
		}
	}
	return ok
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
