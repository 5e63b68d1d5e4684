package validationfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// PermifyFile is a validation file in Permify's format: a schema in Permify's
// language, relationships, attributes (`entity:id$name|type:value`) and scenarios
// whose checks, entity_filters and subject_filters state expected answers.
type PermifyFile struct {
	Name          string
	Schema        string
	schemaLoc     locator
	Relationships []Line
	Attributes    []Line
	Scenarios     []Scenario
}

// Line is one list entry with the file line it was written on.
type Line struct {
	Text string
	Line int
}

// Scenario is one named group of expectations.
type Scenario struct {
	Name           string
	Checks         []PermifyCheck
	EntityFilters  []Filter
	SubjectFilters []Filter
}

// PermifyCheck expects, for one entity and subject, each named permission's answer.
type PermifyCheck struct {
	Entity, Subject string
	Context         map[string]any
	Expect          []Expected[bool]
}

// Filter expects the ids a lookup returns per permission: an entity filter looks up
// entities of EntityType for Subject; a subject filter looks up subjects of type
// Subject (a subject reference, `user` or `team#member`) on Entity.
type Filter struct {
	EntityType, Entity, Subject string
	Context                     map[string]any
	Expect                      []Expected[[]string]
}

// Expected is one assertion: a permission, what it should give, and its line.
type Expected[T any] struct {
	Permission string
	Want       T
	Line       int
}

// IsPermify reports whether src looks like a Permify validation file: it has
// scenarios, or its schema declares entities.
func IsPermify(src []byte) bool {
	var top map[string]any
	if yaml.Unmarshal(src, &top) != nil {
		return false
	}
	if _, ok := top["scenarios"]; ok {
		return true
	}
	s, _ := top["schema"].(string)
	return strings.HasPrefix(strings.TrimSpace(s), "entity ") || strings.Contains(s, "\nentity ")
}

// LoadPermify reads and parses the Permify validation file at path.
func LoadPermify(path string) (*PermifyFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePermify(path, src)
}

type permifyYAML struct {
	Schema        yaml.Node   `yaml:"schema"`
	Relationships []yaml.Node `yaml:"relationships"`
	Attributes    []yaml.Node `yaml:"attributes"`
	Scenarios     []struct {
		Name   string `yaml:"name"`
		Checks []struct {
			Entity     string         `yaml:"entity"`
			Subject    string         `yaml:"subject"`
			Context    map[string]any `yaml:"context"`
			Assertions yaml.Node      `yaml:"assertions"`
		} `yaml:"checks"`
		EntityFilters []struct {
			EntityType string         `yaml:"entity_type"`
			Subject    string         `yaml:"subject"`
			Context    map[string]any `yaml:"context"`
			Assertions yaml.Node      `yaml:"assertions"`
		} `yaml:"entity_filters"`
		SubjectFilters []struct {
			SubjectReference string         `yaml:"subject_reference"`
			Entity           string         `yaml:"entity"`
			Context          map[string]any `yaml:"context"`
			Assertions       yaml.Node      `yaml:"assertions"`
		} `yaml:"subject_filters"`
	} `yaml:"scenarios"`
}

// ParsePermify parses a Permify validation file; problems are a *ProblemsError.
func ParsePermify(name string, src []byte) (*PermifyFile, error) {
	var y permifyYAML
	if err := yaml.Unmarshal(src, &y); err != nil {
		return nil, &ProblemsError{Problems: []Problem{{File: name, Msg: "not a valid Permify validation file: " + err.Error()}}}
	}
	f := &PermifyFile{Name: name, Schema: y.Schema.Value, schemaLoc: newLocator(name, src, &y.Schema)}
	var probs []Problem
	for _, n := range y.Relationships {
		f.Relationships = append(f.Relationships, Line{n.Value, n.Line})
	}
	for _, n := range y.Attributes {
		f.Attributes = append(f.Attributes, Line{n.Value, n.Line})
	}
	for _, s := range y.Scenarios {
		sc := Scenario{Name: s.Name}
		for _, c := range s.Checks {
			exp, p := assertions[bool](name, &c.Assertions)
			probs = append(probs, p...)
			sc.Checks = append(sc.Checks, PermifyCheck{Entity: c.Entity, Subject: c.Subject, Context: c.Context, Expect: exp})
		}
		for _, c := range s.EntityFilters {
			exp, p := assertions[[]string](name, &c.Assertions)
			probs = append(probs, p...)
			sc.EntityFilters = append(sc.EntityFilters, Filter{EntityType: c.EntityType, Subject: c.Subject, Context: c.Context, Expect: exp})
		}
		for _, c := range s.SubjectFilters {
			exp, p := assertions[[]string](name, &c.Assertions)
			probs = append(probs, p...)
			sc.SubjectFilters = append(sc.SubjectFilters, Filter{Entity: c.Entity, Subject: c.SubjectReference, Context: c.Context, Expect: exp})
		}
		f.Scenarios = append(f.Scenarios, sc)
	}
	if len(probs) > 0 {
		return nil, &ProblemsError{Problems: probs}
	}
	return f, nil
}

// assertions reads a `permission: value` mapping in file order.
func assertions[T any](file string, n *yaml.Node) ([]Expected[T], []Problem) {
	var out []Expected[T]
	var probs []Problem
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var want T
		if err := v.Decode(&want); err != nil {
			probs = append(probs, Problem{File: file, Line: v.Line, Col: v.Column, Msg: fmt.Sprintf("assertion %q: %v", k.Value, err)})
			continue
		}
		out = append(out, Expected[T]{Permission: k.Value, Want: want, Line: k.Line})
	}
	return out, probs
}

// PermifyFailure is an expectation that did not hold.
type PermifyFailure struct {
	File string
	Line int
	What string // `check repository:1#push@user:1`
	Msg  string
}

func (f PermifyFailure) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.What, f.Msg)
}

// PermifyReport is the outcome of running a Permify validation file.
type PermifyReport struct {
	File     string
	Checked  int
	Failures []PermifyFailure
}

// OK reports whether every expectation held.
func (r PermifyReport) OK() bool { return len(r.Failures) == 0 }

// RunPermify runs f against a fresh memory store with the rules latch's Permify API
// applies (permdata), so the file sees what a Permify client of `latch serve` would.
func RunPermify(ctx context.Context, f *PermifyFile) (PermifyReport, error) {
	st := memory.New(memory.Options{GCInterval: -1})
	defer st.Close()
	r := &permifyRun{ctx: ctx, st: st, eng: engine.New(engine.Config{}), f: f, rep: PermifyReport{File: f.Name}}
	if err := r.load(); err != nil {
		return PermifyReport{}, err
	}
	head, err := st.HeadRevision(ctx)
	if err != nil {
		return PermifyReport{}, err
	}
	if r.at, err = st.Reader(ctx, head); err != nil {
		return PermifyReport{}, err
	}
	for _, s := range f.Scenarios {
		r.scenario(s)
	}
	return r.rep, nil
}

type permifyRun struct {
	ctx    context.Context
	st     *memory.Store
	eng    *engine.Engine
	schema *permdata.Schema
	at     store.Reader // the loaded data, which the scenarios read
	f      *PermifyFile
	rep    PermifyReport
}

// load compiles the schema and writes the relationships and attributes, each in a
// write of its own as a client would; any problem stops the run.
func (r *permifyRun) load() error {
	if err := schemaProblems(r.f); err != nil {
		return err
	}
	compiled, err := perm.CompileWith(r.f.Schema, perm.Options{PermifyNames: true})
	if err != nil {
		return &ProblemsError{Problems: []Problem{{File: r.f.Name, Line: r.f.schemaLoc.firstLine, Msg: err.Error()}}}
	}
	r.schema = permdata.NewSchema(compiled)
	var probs []Problem
	for _, l := range r.f.Relationships {
		if err := r.writeTuple(l.Text); err != nil {
			probs = append(probs, Problem{File: r.f.Name, Line: l.Line, Msg: fmt.Sprintf("relationship %q: %v", l.Text, err)})
		}
	}
	for _, l := range r.f.Attributes {
		if err := r.writeAttribute(l.Text); err != nil {
			probs = append(probs, Problem{File: r.f.Name, Line: l.Line, Msg: fmt.Sprintf("attribute %q: %v", l.Text, err)})
		}
	}
	if len(probs) > 0 {
		return &ProblemsError{Problems: probs}
	}
	return nil
}

func (r *permifyRun) writeTuple(text string) error {
	t, err := permifyTuple(text)
	if err != nil {
		return err
	}
	if err := r.schema.CheckTuple(t); err != nil {
		return err
	}
	_, err = r.st.Write(r.ctx, nil, []store.Update{{Op: store.Touch, Relationship: t}}, nil)
	return err
}

// writeAttribute writes one attribute value; the rule calls it feeds read the values
// written before it.
func (r *permifyRun) writeAttribute(text string) error {
	a, err := permifyAttribute(text)
	if err != nil {
		return err
	}
	head, err := r.st.HeadRevision(r.ctx)
	if err != nil {
		return err
	}
	at, err := r.st.Reader(r.ctx, head)
	if err != nil {
		return err
	}
	var b permdata.Batch
	if err := r.schema.AttributeUpdates(r.ctx, at, []permdata.Attribute{a}, &b); err != nil {
		return err
	}
	_, err = r.st.Write(r.ctx, nil, b.Updates, nil)
	return err
}

// schemaProblems compiles the schema to report its problems at file lines.
func schemaProblems(f *PermifyFile) error {
	_, err := perm.Compile(f.Schema)
	var de *schema.DiagnosticsError
	if !errors.As(err, &de) {
		return nil
	}
	probs := make([]Problem, len(de.Diagnostics))
	for i, d := range de.Diagnostics {
		p := f.schemaLoc.atLineCol(d.Pos.Line, d.Pos.Col)
		probs[i] = Problem{File: f.Name, Line: p.Line, Col: p.Col, Msg: "schema: " + d.Msg}
	}
	return &ProblemsError{Problems: probs}
}

func (r *permifyRun) fail(line int, what, format string, args ...any) {
	r.rep.Failures = append(r.rep.Failures, PermifyFailure{File: r.f.Name, Line: line, What: what, Msg: fmt.Sprintf(format, args...)})
}

func (r *permifyRun) scenario(s Scenario) {
	for _, c := range s.Checks {
		for _, e := range c.Expect {
			r.rep.Checked++
			what := fmt.Sprintf("scenario %q: check %s#%s@%s", s.Name, c.Entity, e.Permission, c.Subject)
			can, err := r.check(c, e.Permission)
			switch {
			case err != nil:
				r.fail(e.Line, what, "error: %v", err)
			case (can == permdata.Allowed) != e.Want:
				r.fail(e.Line, what, "expected %v, got %s", e.Want, can)
			}
		}
	}
	for _, flt := range s.EntityFilters {
		for _, e := range flt.Expect {
			ids, err := r.lookupEntities(flt, e.Permission)
			r.compareIDs(e, fmt.Sprintf("scenario %q: entity filter %s#%s@%s", s.Name, flt.EntityType, e.Permission, flt.Subject), ids, err)
		}
	}
	for _, flt := range s.SubjectFilters {
		for _, e := range flt.Expect {
			ids, err := r.lookupSubjects(flt, e.Permission)
			r.compareIDs(e, fmt.Sprintf("scenario %q: subject filter %s#%s@%s", s.Name, flt.Entity, e.Permission, flt.Subject), ids, err)
		}
	}
}

func (r *permifyRun) check(c PermifyCheck, permission string) (string, error) {
	cctx, err := requestContext(c.Context)
	if err != nil {
		return "", err
	}
	res, err := r.eng.Check(r.ctx, r.schema.IR, r.at, engine.CheckRequest{
		Resource: subjectOf(c.Entity).Object, Permission: permission, Subject: subjectOf(c.Subject), Context: cctx,
	})
	if err != nil {
		return "", err
	}
	return permdata.Result(res.Membership), nil
}

func (r *permifyRun) lookupEntities(flt Filter, permission string) ([]string, error) {
	cctx, err := requestContext(flt.Context)
	if err != nil {
		return nil, err
	}
	return permdata.LookupEntities(r.ctx, r.eng, r.schema, r.at, engine.LookupResourcesRequest{
		ResourceType: flt.EntityType, Permission: permission, Subject: subjectOf(flt.Subject), Context: cctx,
	})
}

func (r *permifyRun) lookupSubjects(flt Filter, permission string) ([]string, error) {
	cctx, err := requestContext(flt.Context)
	if err != nil {
		return nil, err
	}
	sr := subjectOf(flt.Subject)
	return permdata.LookupSubjects(r.ctx, r.eng, r.schema, r.at, engine.LookupSubjectsRequest{
		Resource: subjectOf(flt.Entity).Object, Permission: permission,
		SubjectType: sr.Object.Type, SubjectRelation: sr.Relation, Context: cctx,
	})
}

// requestContext reads a scenario's context as Permify's API would a request's: its
// data is what rules read; contextual tuples and attributes are refused rather than
// ignored, since ignoring them would give wrong answers.
func requestContext(c map[string]any) (map[string]any, error) {
	for _, key := range []string{"tuples", "attributes"} {
		if list, _ := c[key].([]any); len(list) > 0 {
			return nil, errors.New("contextual tuples and attributes are not supported; write them under relationships and attributes")
		}
	}
	data, _ := c["data"].(map[string]any)
	return permdata.RequestContext(data), nil
}

func (r *permifyRun) compareIDs(e Expected[[]string], what string, got []string, err error) {
	r.rep.Checked++
	want := slices.Clone(e.Want)
	slices.Sort(want)
	slices.Sort(got)
	switch {
	case err != nil:
		r.fail(e.Line, what, "error: %v", err)
	case !slices.Equal(want, got) && !(len(want) == 0 && len(got) == 0):
		r.fail(e.Line, what, "expected %v, got %v", want, got)
	}
}

// subjectOf reads `type:id`, `type:id#rel` or a bare `type[#rel]`; Permify writes
// the ellipsis relation as "...".
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

// permifyAttribute parses `entity:id$name|type:value` (value in JSON; a string may be
// written bare).
func permifyAttribute(s string) (permdata.Attribute, error) {
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
