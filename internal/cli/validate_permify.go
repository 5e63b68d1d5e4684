package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/latch-authz/latch/internal/validationfile"
)

// validatePermifyFile runs path if it is a validation file in Permify's format
// (schema in Permify's language, scenarios with checks, entity_filters and
// subject_filters). isPermify is false for every other file, which the SpiceDB-format
// runner then reads; passed says whether every expectation held.
func validatePermifyFile(ctx context.Context, path string, out io.Writer) (isPermify, passed bool) {
	src, err := os.ReadFile(path)
	if err != nil || !validationfile.IsPermify(src) {
		return false, false
	}
	f, err := validationfile.ParsePermify(path, src)
	var rep validationfile.PermifyReport
	if err == nil {
		rep, err = validationfile.RunPermify(ctx, f)
	}
	var probs *validationfile.ProblemsError
	switch {
	case errors.As(err, &probs):
		for _, p := range probs.Problems {
			fmt.Fprintln(out, p.String())
		}
		fmt.Fprintf(out, "%s: not run: %s\n", path, plural(len(probs.Problems), "problem"))
		return true, false
	case err != nil:
		fmt.Fprintf(out, "%s: %v\n", path, err)
		return true, false
	}
	for _, fl := range rep.Failures {
		fmt.Fprintln(out, fl.String())
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintf(out, "%s: %d of %s failed\n", path, len(rep.Failures), plural(rep.Checked, "assertion"))
		return true, false
	}
	fmt.Fprintf(out, "%s: %s held\n", path, plural(rep.Checked, "assertion"))
	return true, true
}
