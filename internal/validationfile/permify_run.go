package validationfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/server/permify"
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

// RunPermify runs f against a fresh memory store through latch's Permify API adapter,
// so the file sees exactly what a Permify client of `latch serve` would. A query with
// contextual tuples or attributes runs against a copy of the data with them written.
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

// permifyEnv is a Permify API handler over a memory store holding a file's data.
type permifyEnv struct {
	ctx context.Context
	st  *memory.Store
	h   *permify.Handler
}

// newPermifyEnv writes f's schema, relationships and attributes, and those of extra,
// into a fresh store. Any that cannot be written is a *ProblemsError.
func newPermifyEnv(ctx context.Context, f *PermifyFile, extra PermifyContext) (*permifyEnv, error) {
	st := memory.New(memory.Options{GCInterval: -1})
	h, err := permify.New(permify.Config{Engine: engine.New(engine.Config{}), Default: st})
	if err != nil {
		st.Close()
		return nil, err
	}
	e := &permifyEnv{ctx: ctx, st: st, h: h}
	if err := e.load(f, extra); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *permifyEnv) close() {
	e.h.Close()
	e.st.Close()
}

func (e *permifyEnv) call(endpoint string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	out, err := e.h.Call(e.ctx, permify.DefaultTenant, endpoint, body)
	if err != nil {
		return err
	}
	return json.NewDecoder(bytes.NewReader(out)).Decode(resp)
}

func (e *permifyEnv) load(f *PermifyFile, extra PermifyContext) error {
	var discard map[string]any
	if err := e.call("schemas/write", map[string]any{"schema": f.Schema}, &discard); err != nil {
		return &ProblemsError{Problems: []Problem{{File: f.Name, Line: f.schemaLoc.firstLine, Msg: err.Error()}}}
	}
	var probs problems
	write := func(kind string, lines []Line, toJSON func(string) (map[string]any, error), field string) {
		for _, l := range lines {
			item, err := toJSON(l.Text)
			if err == nil {
				err = e.call("data/write", map[string]any{field: []any{item}}, &discard)
			}
			if err != nil {
				probs.add(position{File: f.Name, Line: l.Line}, "%s %q: %v", kind, l.Text, err)
			}
		}
	}
	write("relationship", f.Relationships, tupleJSON, "tuples")
	write("attribute", f.Attributes, attributeJSON, "attributes")
	write("contextual tuple", extra.Tuples, tupleJSON, "tuples")
	write("contextual attribute", extra.Attributes, attributeJSON, "attributes")
	return probs.err()
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

// requestContext is the API's context: contextual data only, since contextual
// tuples and attributes are already written into the query's store.
func requestContext(c PermifyContext) map[string]any {
	if c.Data == nil {
		return nil
	}
	return map[string]any{"data": c.Data}
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
			var resp struct {
				EntityIDs []string `json:"entity_ids"`
			}
			err := e.call("permissions/lookup-entity", map[string]any{
				"entity_type": flt.EntityType, "permission": permission,
				"subject": objectJSON(flt.Subject), "context": requestContext(flt.Context),
			}, &resp)
			return resp.EntityIDs, err
		})
	}
	for _, flt := range s.SubjectFilters {
		what := func(permission string) string {
			return fmt.Sprintf("scenario %q: subject filter %s#%s@%s", s.Name, flt.Entity, permission, flt.Subject)
		}
		r.filter(flt, what, func(e *permifyEnv, permission string) ([]string, error) {
			var resp struct {
				SubjectIDs []string `json:"subject_ids"`
			}
			err := e.call("permissions/lookup-subject", map[string]any{
				"entity": objectJSON(flt.Entity), "permission": permission,
				"subject_reference": objectJSON(flt.Subject), "context": requestContext(flt.Context),
			}, &resp)
			return resp.SubjectIDs, err
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
		var resp struct{ Can string }
		err := e.call("permissions/check", map[string]any{
			"entity": objectJSON(c.Entity), "permission": x.Permission,
			"subject": objectJSON(c.Subject), "context": requestContext(c.Context),
		}, &resp)
		switch {
		case err != nil:
			r.fail(x.Line, what, "error: %v", err)
		case (resp.Can == "CHECK_RESULT_ALLOWED") != x.Want:
			r.fail(x.Line, what, "expected %v, found %v (%s)", x.Want, !x.Want, resp.Can)
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

// objectJSON turns `type:id`, `type:id#rel` or a bare `type[#rel]` into wire JSON.
func objectJSON(s string) map[string]any {
	out := map[string]any{}
	obj, relation, _ := strings.Cut(s, "#")
	typ, id, _ := strings.Cut(obj, ":")
	out["type"] = typ
	if id != "" {
		out["id"] = id
	}
	if relation != "" {
		out["relation"] = relation
	}
	return out
}

func tupleJSON(s string) (map[string]any, error) {
	r, err := rel.Parse(s)
	if err != nil {
		return nil, err
	}
	if r.Caveat != nil || r.Expiration != nil {
		return nil, errors.New("relationships in Permify have no caveats or expiration")
	}
	subject := map[string]any{"type": r.Subject.Object.Type, "id": r.Subject.Object.ID}
	if r.Subject.Relation != "" {
		subject["relation"] = r.Subject.Relation
	}
	return map[string]any{
		"entity":   map[string]any{"type": r.Resource.Type, "id": r.Resource.ID},
		"relation": r.Relation, "subject": subject,
	}, nil
}

// attributeJSON parses `entity:id$name|type:value` (value in JSON; a string may be
// written bare).
func attributeJSON(s string) (map[string]any, error) {
	obj, rest, ok := strings.Cut(s, "$")
	name, typed, ok2 := strings.Cut(rest, "|")
	typ, value, ok3 := strings.Cut(typed, ":")
	typeName, id, ok4 := strings.Cut(obj, ":")
	if !ok || !ok2 || !ok3 || !ok4 {
		return nil, fmt.Errorf("expected `entity:id$attribute|type:value`")
	}
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		if !strings.HasPrefix(typ, "string") {
			return nil, fmt.Errorf("value %q is not valid for type %s", value, typ)
		}
		v = value
	}
	return map[string]any{"entity": map[string]any{"type": typeName, "id": id}, "attribute": name, "value": v}, nil
}
