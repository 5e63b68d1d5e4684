package validationfile

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// Failure is an assertion that did not hold.
type Failure struct {
	File      string
	Assertion Assertion
	// Got is the engine's answer; meaningful only when Err is nil.
	Got engine.Result
	// Err is why the check could not be answered (an unknown permission, the depth limit).
	Err error
}

// String renders `file:line: assertTrue "doc:1#view@user:a": got NO_PERMISSION`.
func (f Failure) String() string {
	return fmt.Sprintf("%s:%d: %s %q: %s", f.File, f.Assertion.Line, f.Assertion.Expect, f.Assertion.Text, f.what())
}

func (f Failure) what() string {
	if f.Err != nil {
		return "error: " + f.Err.Error()
	}
	got := "got " + f.Got.Membership.String()
	if f.Got.Membership == engine.Conditional && len(f.Got.Missing) > 0 {
		got += " (missing context: " + strings.Join(f.Got.Missing, ", ") + ")"
	}
	return "expected " + f.Assertion.Expect.Membership().String() + ", " + got
}

// Report is the outcome of running one file.
type Report struct {
	File string
	// Checked counts the assertions evaluated.
	Checked  int
	Failures []Failure
	// Unchecked lists parts of the file that were not checked because latch does not
	// support them yet (SpiceDB's expected relations). A report with any is not OK.
	Unchecked []string
}

// OK reports whether every assertion held and nothing was left unchecked.
func (r Report) OK() bool { return len(r.Failures) == 0 && len(r.Unchecked) == 0 }

// Run compiles the file's schema, loads its relationships into a fresh memory store
// (each validated against the schema) and evaluates every assertion. A file that
// cannot be run (the schema does not compile, a relationship is not allowed) is a
// *ProblemsError; assertions that do not hold are Failures in the Report.
func Run(ctx context.Context, f *File) (Report, error) {
	rep := Report{File: f.Name}
	s, err := f.compile()
	if err != nil {
		return rep, err
	}
	st := memory.New(memory.Options{GCInterval: -1})
	defer st.Close()
	r, err := f.load(ctx, s, st)
	if err != nil {
		return rep, err
	}
	eng := engine.New(engine.Config{})
	for _, a := range f.Assertions {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		got, err := eng.Check(ctx, s, r, a.Check)
		rep.Checked++
		if err != nil || got.Membership != a.Expect.Membership() {
			rep.Failures = append(rep.Failures, Failure{File: f.Name, Assertion: a, Got: got, Err: err})
		}
	}
	if n := len(f.ExpectedRelations); n > 0 {
		rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("the validation section (expected relations, %d entries) is not supported yet and was not checked", n))
	}
	return rep, nil
}

// compile compiles the schema, placing each diagnostic on its file line.
func (f *File) compile() (*ir.Schema, error) {
	if strings.TrimSpace(f.Schema) == "" {
		if f.SchemaFile != "" {
			return nil, &ProblemsError{Problems: []Problem{{File: f.Name, Msg: fmt.Sprintf("schemaFile %q was not read (use Load to read it)", f.SchemaFile)}}}
		}
		return nil, &ProblemsError{Problems: []Problem{{File: f.Name, Msg: "no schema: the file needs a schema or schemaFile key"}}}
	}
	s, err := schema.Compile(f.Schema)
	if err == nil {
		return s, nil
	}
	var diags *schema.DiagnosticsError
	if !errors.As(err, &diags) {
		return nil, &ProblemsError{Problems: []Problem{{File: f.Name, Msg: "schema: " + err.Error()}}}
	}
	var probs problems
	for _, d := range diags.Diagnostics {
		pos := f.schemaLoc.atLineCol(d.Pos.Line, d.Pos.Col)
		probs.add(pos, "schema: %s", d.Msg)
	}
	return nil, probs.err()
}

// load validates every relationship against s and writes them all in one batch,
// returning a reader that sees them.
func (f *File) load(ctx context.Context, s *ir.Schema, st store.Store) (store.Reader, error) {
	var probs problems
	seen := make(map[rel.Key]int, len(f.Relationships))
	updates := make([]store.Update, 0, len(f.Relationships))
	for _, r := range f.Relationships {
		pos := position{File: f.Name, Line: r.Line}
		if err := s.ValidateRelationship(r.Relationship); err != nil {
			probs.add(pos, "relationship %q: %v", r.Text, err)
			continue
		}
		if first, dup := seen[r.Relationship.Key()]; dup {
			probs.add(pos, "relationship %q: duplicate of the relationship on line %d", r.Text, first)
			continue
		}
		seen[r.Relationship.Key()] = r.Line
		updates = append(updates, store.Update{Op: store.Create, Relationship: r.Relationship})
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	rev, err := st.HeadRevision(ctx)
	if len(updates) > 0 {
		rev, err = st.Write(ctx, nil, updates, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("loading relationships: %w", err)
	}
	return st.Reader(ctx, rev)
}
