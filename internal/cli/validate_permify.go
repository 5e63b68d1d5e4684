package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/latch-authz/latch/internal/validationfile"
)

// validatePermifyFile runs path if it is a validation file in Permify's format
// (schema in Permify's language, scenarios with checks, entity_filters and
// subject_filters). isPermify is false for every other file, which the SpiceDB-format
// runner then reads; passed says whether every expectation held. update is refused:
// Permify's format has no section of computed answers to rewrite.
func validatePermifyFile(ctx context.Context, path string, update bool, out io.Writer) (isPermify, passed bool) {
	src, err := os.ReadFile(path)
	if err != nil || !validationfile.IsPermify(src) {
		return false, false
	}
	if update {
		fmt.Fprintf(out, "%s: not updated: --update rewrites SpiceDB's validation section, which Permify's format does not have\n", path)
		return true, false
	}
	f, err := validationfile.LoadPermify(path)
	var rep validationfile.PermifyReport
	if err == nil {
		rep, err = validationfile.RunPermify(ctx, f)
	}
	if err != nil {
		printProblems(out, path, err)
		return true, false
	}
	for _, fl := range rep.Failures {
		fmt.Fprintln(out, fl.String())
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(out, "%s: %s (%s checked)\n", path, plural(len(rep.Failures), "failure"), plural(rep.Checked, "assertion"))
		return true, false
	}
	fmt.Fprintf(out, "%s: %s held\n", path, plural(rep.Checked, "assertion"))
	return true, true
}
