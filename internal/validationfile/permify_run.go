package validationfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// PermifyReport is the outcome of running a Permify validation file.
type PermifyReport struct {
	File     string
	Checked  int
	Failures []Failure
}

// OK reports whether every expectation held.
func (r PermifyReport) OK() bool { return len(r.Failures) == 0 }

// RunPermify runs f against a fresh memory store with the rules latch's Permify API
// applies (internal/permdata), so the file sees what a Permify client of `latch serve`
// would. A query with contextual tuples or attributes runs against a copy of the data
// with them written.
func RunPermify(ctx context.Context, f *PermifyFile) (PermifyReport, error) {
	if f.Schema == "" && f.SchemaPath != "" {
		return PermifyReport{}, &ProblemsError{Problems: []Problem{{File: f.Name, Line: f.schemaLoc.firstLine, Msg: fmt.Sprintf("schema file %q was not read (use LoadPermify to read it)", f.SchemaPath)}}}
	}
	if err := schemaProblems(f); err != nil {
		return PermifyReport{}, err
	}
	base, err := newPermifyEnv(ctx, f, PermifyContext{})
	if err != nil {
		return PermifyReport{}, err
	}
	defer base.close()
	r := &permifyRun{ctx: ctx, f: f, base: base, rep: PermifyReport{File: f.Name}}
	for _, s := range f.Scenarios {
		if err := ctx.Err(); err != nil {
			return r.rep, err
		}
		r.scenario(s)
	}
	return r.rep, nil
}

// permifyEnv is a memory store holding a file's data, read at its newest revision.
type permifyEnv struct {
	ctx    context.Context
	st     *memory.Store
	eng    *engine.Engine
	schema *permdata.Schema
	at     store.Reader
}

// newPermifyEnv writes f's schema, relationships and attributes, and those of extra,
// into a fresh store. Any that cannot be written is a *ProblemsError.
func newPermifyEnv(ctx context.Context, f *PermifyFile, extra PermifyContext) (*permifyEnv, error) {
	compiled, err := perm.CompileWith(f.Schema, perm.Options{PermifyNames: true})
	if err != nil {
		return nil, &ProblemsError{Problems: []Problem{{File: f.Name, Line: f.schemaLoc.firstLine, Msg: err.Error()}}}
	}
	e := &permifyEnv{ctx: ctx, st: memory.New(memory.Options{GCInterval: -1}), eng: engine.New(engine.Config{}), schema: permdata.NewSchema(compiled)}
	if err := e.load(f, extra); err != nil {
		e.close()
		return nil, err
	}
	head, err := e.st.HeadRevision(ctx)
	if err == nil {
		e.at, err = e.st.Reader(ctx, head)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *permifyEnv) close() { e.st.Close() }

// load writes each relationship and attribute in a write of its own, as a client
// would: an attribute's rule calls read the values written before it.
func (e *permifyEnv) load(f *PermifyFile, extra PermifyContext) error {
	var probs problems
	write := func(kind string, lines []Line, write func(string) error) {
		for _, l := range lines {
			if err := write(l.Text); err != nil {
				probs.add(position{File: f.Name, Line: l.Line}, "%s %q: %v", kind, l.Text, err)
			}
		}
	}
	write("relationship", f.Relationships, e.writeTuple)
	write("attribute", f.Attributes, e.writeAttribute)
	write("contextual tuple", extra.Tuples, e.writeTuple)
	write("contextual attribute", extra.Attributes, e.writeAttribute)
	return probs.err()
}

func (e *permifyEnv) writeTuple(text string) error {
	t, err := permifyTuple(text)
	if err != nil {
		return err
	}
	if err := e.schema.CheckTuple(t); err != nil {
		return err
	}
	_, err = e.st.Write(e.ctx, nil, []store.Update{{Op: store.Touch, Relationship: t}}, nil)
	return err
}

func (e *permifyEnv) writeAttribute(text string) error {
	a, err := ParsePermifyAttribute(text)
	if err != nil {
		return err
	}
	head, err := e.st.HeadRevision(e.ctx)
	if err != nil {
		return err
	}
	at, err := e.st.Reader(e.ctx, head)
	if err != nil {
		return err
	}
	var b permdata.Batch
	if err := e.schema.AttributeUpdates(e.ctx, at, []permdata.Attribute{a}, &b); err != nil {
		return err
	}
	_, err = e.st.Write(e.ctx, nil, b.Updates, nil)
	return err
}

// schemaProblems compiles the schema to report its problems at file lines.
func schemaProblems(f *PermifyFile) error {
	_, err := perm.Compile(f.Schema)
	var de *schema.DiagnosticsError
	if !errors.As(err, &de) {
		return nil
	}
	var probs problems
	for _, d := range de.Diagnostics {
		probs.add(f.schemaLoc.atLineCol(d.Pos.Line, d.Pos.Col), "schema: %s", d.Msg)
	}
	return probs.err()
}

type permifyRun struct {
	ctx  context.Context
	f    *PermifyFile
	base *permifyEnv
	rep  PermifyReport
}

func (r *permifyRun) fail(line int, what, format string, args ...any) {
	r.rep.Failures = append(r.rep.Failures, Failure{File: r.f.Name, Line: line, What: what, Msg: fmt.Sprintf(format, args...)})
}

// env returns where a query with context c runs and a function to release it: the
// file's data, or a copy with c's tuples and attributes written. A contextual item
// that cannot be written fails the query at its line.
func (r *permifyRun) env(c PermifyContext, what string, line int) (*permifyEnv, func(), bool) {
	if len(c.Tuples) == 0 && len(c.Attributes) == 0 {
		return r.base, func() {}, true
	}
	e, err := newPermifyEnv(r.ctx, r.f, c)
	var pe *ProblemsError
	switch {
	case errors.As(err, &pe):
		for _, p := range pe.Problems {
			r.fail(p.Line, what, "%s", p.Msg)
		}
		return nil, nil, false
	case err != nil:
		r.fail(line, what, "error: %v", err)
		return nil, nil, false
	}
	return e, e.close, true
}

// requestContext is the engine's context for a query: its data, which rules read;
// contextual tuples and attributes are already written into the query's store.
func requestContext(c PermifyContext) map[string]any {
	return permdata.RequestContext(c.Data)
}

func (r *permifyRun) scenario(s Scenario) {
	for _, c := range s.Checks {
		r.check(s, c)
	}
	for _, flt := range s.EntityFilters {
		what := func(permission string) string {
			return fmt.Sprintf("scenario %q: entity filter %s#%s@%s", s.Name, flt.EntityType, permission, flt.Subject)
		}
		r.filter(flt, what, func(e *permifyEnv, permission string) ([]string, error) {
			return permdata.LookupEntities(e.ctx, e.eng, e.schema, e.at, engine.LookupResourcesRequest{
				ResourceType: flt.EntityType, Permission: permission, Subject: subjectOf(flt.Subject), Context: requestContext(flt.Context),
			})
		})
	}
	for _, flt := range s.SubjectFilters {
		what := func(permission string) string {
			return fmt.Sprintf("scenario %q: subject filter %s#%s@%s", s.Name, flt.Entity, permission, flt.Subject)
		}
		r.filter(flt, what, func(e *permifyEnv, permission string) ([]string, error) {
			sr := subjectOf(flt.Subject)
			return permdata.LookupSubjects(e.ctx, e.eng, e.schema, e.at, engine.LookupSubjectsRequest{
				Resource: subjectOf(flt.Entity).Object, Permission: permission,
				SubjectType: sr.Object.Type, SubjectRelation: sr.Relation, Context: requestContext(flt.Context),
			})
		})
	}
}

func (r *permifyRun) check(s Scenario, c PermifyCheck) {
	e, release, ok := r.env(c.Context, fmt.Sprintf("scenario %q: check %s#*@%s", s.Name, c.Entity, c.Subject), c.Line)
	if !ok {
		return
	}
	defer release()
	for _, x := range c.Expect {
		r.rep.Checked++
		what := fmt.Sprintf("scenario %q: check %s#%s@%s", s.Name, c.Entity, x.Permission, c.Subject)
		res, err := e.eng.Check(e.ctx, e.schema.IR, e.at, engine.CheckRequest{
			Resource: subjectOf(c.Entity).Object, Permission: x.Permission, Subject: subjectOf(c.Subject), Context: requestContext(c.Context),
		})
		can := permdata.Result(res.Membership)
		switch {
		case err != nil:
			r.fail(x.Line, what, "error: %v", err)
		case (can == permdata.Allowed) != x.Want:
			r.fail(x.Line, what, "expected %v, found %v (%s)", x.Want, !x.Want, can)
		}
	}
}

// filter compares each expected id list with the lookup's answer, in any order; what
// names the query for a permission.
func (r *permifyRun) filter(flt Filter, what func(permission string) string, lookup func(*permifyEnv, string) ([]string, error)) {
	e, release, ok := r.env(flt.Context, what("*"), flt.Line)
	if !ok {
		return
	}
	defer release()
	for _, x := range flt.Expect {
		r.rep.Checked++
		got, err := lookup(e, x.Permission)
		want := slices.Clone(x.Want)
		slices.Sort(want)
		slices.Sort(got)
		switch {
		case err != nil:
			r.fail(x.Line, what(x.Permission), "error: %v", err)
		case !slices.Equal(want, got):
			r.fail(x.Line, what(x.Permission), "expected %s, found %s", fmtIDs(want), fmtIDs(got))
		}
	}
}

func fmtIDs(ids []string) string {
	return "[" + strings.Join(ids, ", ") + "]"
}

// subjectOf reads `type:id`, `type:id#rel` or a bare `type[#rel]`; Permify's `...`
// relation is the object itself.
func subjectOf(s string) rel.SubjectRef {
	obj, relation, _ := strings.Cut(s, "#")
	typ, id, _ := strings.Cut(obj, ":")
	if relation == "..." {
		relation = ""
	}
	return rel.SubjectRef{Object: rel.ObjectRef{Type: typ, ID: id}, Relation: relation}
}

func permifyTuple(s string) (rel.Relationship, error) {
	r, err := rel.Parse(s)
	if err != nil {
		return r, err
	}
	if r.Caveat != nil || r.Expiration != nil {
		return r, errors.New("relationships in Permify have no caveats or expiration")
	}
	return r, nil
}

// ParsePermifyAttribute parses `entity:id$name|type:value` (value in JSON; a string may be
// written bare).
func ParsePermifyAttribute(s string) (permdata.Attribute, error) {
	obj, rest, ok := strings.Cut(s, "$")
	name, typed, ok2 := strings.Cut(rest, "|")
	typ, value, ok3 := strings.Cut(typed, ":")
	typeName, id, ok4 := strings.Cut(obj, ":")
	if !ok || !ok2 || !ok3 || !ok4 {
		return permdata.Attribute{}, fmt.Errorf("expected `entity:id$attribute|type:value`")
	}
	raw := json.RawMessage(value)
	if !json.Valid(raw) {
		if !strings.HasPrefix(typ, "string") {
			return permdata.Attribute{}, fmt.Errorf("value %q is not valid for type %s", value, typ)
		}
		quoted, err := json.Marshal(value)
		if err != nil {
			return permdata.Attribute{}, err
		}
		raw = quoted
	}
	return permdata.Attribute{Entity: rel.ObjectRef{Type: typeName, ID: id}, Name: name, Value: raw}, nil
}
