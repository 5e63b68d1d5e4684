package materialize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Target is one configured permission to stream, `resource#permission@subject_type`
// (AuthZed Materialize's configuration entry).
type Target struct {
	Resource, Permission, SubjectType string
}

func (t Target) String() string { return t.Resource + "#" + t.Permission + "@" + t.SubjectType }

// TargetSyntaxError: a configuration entry that is not `resource#permission@subject_type`.
type TargetSyntaxError struct{ Entry, Problem string }

func (e *TargetSyntaxError) Error() string {
	return fmt.Sprintf("materialize configuration entry %q: %s (want resource#permission@subject_type, e.g. document#view@user)", e.Entry, e.Problem)
}

// ParseTargets reads a configuration: entries separated by commas or new lines, blank
// lines and `//` or `#`-led comment lines ignored. Duplicates are kept once.
func ParseTargets(text string) ([]Target, error) {
	var out []Target
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") || strings.HasPrefix(line, "#") {
			continue
		}
		for entry := range strings.SplitSeq(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			t, err := parseTarget(entry)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

func parseTarget(entry string) (Target, error) {
	res, rest, ok := strings.Cut(entry, "#")
	if !ok {
		return Target{}, &TargetSyntaxError{entry, "no `#` between the resource type and the permission"}
	}
	perm, subj, ok := strings.Cut(rest, "@")
	if !ok {
		return Target{}, &TargetSyntaxError{entry, "no `@` before the subject type"}
	}
	t := Target{Resource: res, Permission: perm, SubjectType: subj}
	for _, part := range []struct{ what, v string }{{"resource type", res}, {"permission", perm}, {"subject type", subj}} {
		if part.v == "" {
			return Target{}, &TargetSyntaxError{entry, "empty " + part.what}
		}
	}
	if err := rel.ValidateType(res); err != nil {
		return Target{}, &TargetSyntaxError{entry, "resource type: " + err.Error()}
	}
	if err := rel.ValidateType(subj); err != nil {
		return Target{}, &TargetSyntaxError{entry, "subject type: " + err.Error()}
	}
	if err := rel.ValidateRelationName(perm); err != nil {
		return Target{}, &TargetSyntaxError{entry, "permission: " + err.Error()}
	}
	return t, nil
}

// TargetError: a configured target the schema cannot stream. It wraps the schema's
// own error for an unknown type or permission (ir.UnknownDefinitionError,
// ir.UnknownRelationError), so that the API answers it as SpiceDB answers those.
type TargetError struct {
	Target Target
	// Part names what is wrong: "resource type", "permission", "subject type" or the
	// rewrite ("path").
	Part    string
	Problem string
	Err     error
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("materialize target %s: %s: %s", e.Target, e.Part, e.Problem)
}

func (e *TargetError) Unwrap() error { return e.Err }

// ValidateTargets checks every target against s and returns the first problem.
func ValidateTargets(s *ir.Schema, targets []Target) error {
	_, bad := newSetGraph(s, targets)
	if len(bad) > 0 {
		return bad[0]
	}
	return nil
}
