package validationfile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// Failure is an assertion or an expected relation that did not hold.
type Failure struct {
	File      string
	Line, Col int // Col is 0 when unknown
	// What names the item: `assertTrue "document:1#view@user:a"`, or the entry
	// `document:1#view` of the validation section.
	What string
	// Msg says what was expected and what was found.
	Msg string
	// Err is set when the item could not be evaluated at all (an unknown permission,
	// the depth limit); Msg then holds its text.
	Err error
}

// String renders `file:line: what: expected ..., found ...`.
func (f Failure) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.What, f.Msg)
}

// AssertionResult is the answer to one assertion.
type AssertionResult struct {
	Assertion Assertion
	// Got is the engine's answer; meaningful only when Err is nil.
	Got engine.Result
	Err error
}

// OK reports whether the assertion held.
func (a AssertionResult) OK() bool {
	return a.Err == nil && a.Got.Membership == a.Assertion.Expect.Membership()
}

// Failure describes how the assertion, of the named file, failed.
func (a AssertionResult) Failure(file string) Failure {
	f := Failure{File: file, Line: a.Assertion.Line, What: fmt.Sprintf("%s %q", a.Assertion.Expect, a.Assertion.Text), Err: a.Err}
	if a.Err != nil {
		f.Msg = "error: " + a.Err.Error()
		return f
	}
	got := a.Got.Membership.String()
	if a.Got.Membership == engine.Conditional && len(a.Got.Missing) > 0 {
		got += " (missing context: " + strings.Join(a.Got.Missing, ", ") + ")"
	}
	f.Msg = "expected " + a.Assertion.Expect.Membership().String() + ", found " + got
	return f
}

// RelationResult is the outcome of one entry of the validation section.
type RelationResult struct {
	Expected ExpectedRelation
	// Found lists the subjects the permission's expansion reaches, sorted as zed
	// writes them; nil when Err is set.
	Found []FoundSubject
	Err   error
	// Failures lists every difference between Expected and Found.
	Failures []Failure
}

// OK reports whether the entry held.
func (r RelationResult) OK() bool { return r.Err == nil && len(r.Failures) == 0 }

// Report is the outcome of running one file: every item with its answer, and every
// failure in line order.
type Report struct {
	File       string
	Assertions []AssertionResult
	Relations  []RelationResult
	Failures   []Failure
}

// OK reports whether every assertion and expected relation held.
func (r Report) OK() bool { return len(r.Failures) == 0 }

// Run compiles the file's schema, loads its relationships into a fresh memory store
// (each validated against the schema), evaluates every assertion and computes every
// entry of the validation section. A file that cannot be run (the schema does not
// compile, a relationship is not allowed) is a *ProblemsError; items that do not hold
// are Failures in the Report.
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
		res := AssertionResult{Assertion: a, Got: got, Err: err}
		rep.Assertions = append(rep.Assertions, res)
		if !res.OK() {
			rep.Failures = append(rep.Failures, res.Failure(f.Name))
		}
	}
	x := newExpansion(eng, s, r)
	for _, er := range f.Validation {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		res := x.relationResult(ctx, f.Name, er)
		rep.Relations = append(rep.Relations, res)
		rep.Failures = append(rep.Failures, res.Failures...)
	}
	slices.SortStableFunc(rep.Failures, func(a, b Failure) int { return cmp.Compare(a.Line, b.Line) })
	return rep, nil
}

// relationResult expands one entry and compares it with what the file expects.
func (x *expansion) relationResult(ctx context.Context, file string, er ExpectedRelation) RelationResult {
	res := RelationResult{Expected: er}
	set, err := x.subjects(ctx, er.Resource, er.Permission, engine.DefaultMaxDepth)
	if err != nil {
		res.Err = err
		res.Failures = []Failure{{File: file, Line: er.Line, Col: er.Col, What: er.Key, Msg: "error: " + err.Error(), Err: err}}
		return res
	}
	res.Found = set.list()
	res.Failures = compareRelation(file, er, res.Found)
	return res
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
