package validationfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// PermifyFile is a validation file in Permify's format: a schema in Permify's
// language, relationships, attributes (`entity:id$name|type:value`) and scenarios
// whose checks, entity_filters and subject_filters state expected answers.
type PermifyFile struct {
	Name   string
	Schema string
	// SchemaPath is the `schema` key when it names a schema file rather than holding
	// the schema (a path relative to the file's directory); LoadPermify reads it.
	SchemaPath    string
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
	Name, Description string
	Checks            []PermifyCheck
	EntityFilters     []Filter
	SubjectFilters    []Filter
}

// PermifyContext is a check's or filter's context: contextual tuples and attributes,
// which count for that query alone as if written, and data that rules read as
// `context.data.x`.
type PermifyContext struct {
	Tuples     []Line
	Attributes []Line
	Data       map[string]any
}

// PermifyCheck expects, for one entity and subject, each named permission's answer.
type PermifyCheck struct {
	Entity, Subject string
	Line            int
	Context         PermifyContext
	Expect          []Expected[bool]
}

// Filter expects the ids a lookup returns per permission: an entity filter looks up
// entities of EntityType for Subject; a subject filter looks up subjects of type
// Subject (a subject reference, `user` or `team#member`) on Entity.
type Filter struct {
	EntityType, Entity, Subject string
	Line                        int
	Context                     PermifyContext
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

// LoadPermify reads and parses the Permify validation file at path, and the schema
// file its `schema` names, if it names one (read relative to the file's directory,
// never outside it). Permify also accepts a URL there; latch validates offline and
// says so.
func LoadPermify(path string) (*PermifyFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := ParsePermify(path, src)
	if err != nil || f.SchemaPath == "" {
		return f, err
	}
	problem := func(msg string) error {
		return &ProblemsError{Problems: []Problem{{File: f.Name, Line: f.schemaLoc.firstLine, Msg: msg}}}
	}
	if strings.HasPrefix(f.SchemaPath, "http://") || strings.HasPrefix(f.SchemaPath, "https://") {
		return nil, problem(fmt.Sprintf("schema %q: latch validate does not fetch schemas over the network; download it and name the file", f.SchemaPath))
	}
	dir := filepath.Dir(path)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	text, err := root.ReadFile(filepath.FromSlash(f.SchemaPath))
	if err != nil {
		return nil, problem(fmt.Sprintf("schema file %q: %v", f.SchemaPath, err))
	}
	f.Schema = string(text)
	f.schemaLoc = identityLocator(filepath.Join(dir, f.SchemaPath), f.Schema)
	return f, nil
}

// isSchemaPath reports whether a `schema` value names a file or URL: one line that
// holds no schema declaration.
func isSchemaPath(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && !strings.ContainsAny(s, "\n{}") && !strings.HasPrefix(s, "entity ")
}

// ParsePermify parses a Permify validation file; problems are a *ProblemsError. A
// `schema` naming a file is recorded in SchemaPath (LoadPermify reads it).
func ParsePermify(name string, src []byte) (*PermifyFile, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, &ProblemsError{Problems: []Problem{{File: name, Msg: "not a valid Permify validation file: " + strings.TrimPrefix(err.Error(), "yaml: ")}}}
	}
	p := &permifyParser{yamlReader: yamlReader{name: name, src: src}, f: &PermifyFile{Name: name}}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		p.probs.add(position{File: name}, "expected a mapping with keys schema, relationships, attributes, scenarios")
		return nil, p.probs.err()
	}
	p.top(doc.Content[0])
	if err := p.probs.err(); err != nil {
		return nil, err
	}
	return p.f, nil
}

type permifyParser struct {
	yamlReader
	f *PermifyFile
}

// fields returns a mapping's values by key, reporting keys outside allowed (a typo
// would otherwise silently drop expectations) and values that are not mappings.
func (p *permifyParser) fields(what string, n *yaml.Node, allowed ...string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if isNull(n) {
		return out
	}
	if n.Kind != yaml.MappingNode {
		p.probs.add(p.pos(n), "%s: expected a mapping with keys %s, found %s", what, strings.Join(allowed, ", "), kindName(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !slices.Contains(allowed, k.Value) {
			p.probs.add(p.pos(k), "%s: unknown key %q (expected %s)", what, k.Value, strings.Join(allowed, ", "))
			continue
		}
		out[k.Value] = n.Content[i+1]
	}
	return out
}

// decode decodes an optional value, reporting a mismatch at its line.
func (p *permifyParser) decode(what string, n *yaml.Node, v any) {
	if n == nil || isNull(n) {
		return
	}
	if err := n.Decode(v); err != nil {
		p.probs.add(p.pos(n), "%s: %s", what, strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "))
	}
}

// lines reads a list of strings with their lines.
func (p *permifyParser) lines(what string, n *yaml.Node) []Line {
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.probs.add(p.pos(n), "%s: expected a list, found %s", what, kindName(n))
		return nil
	}
	out := make([]Line, 0, len(n.Content))
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode {
			p.probs.add(p.pos(item), "%s: expected text, found %s", what, kindName(item))
			continue
		}
		out = append(out, Line{Text: item.Value, Line: item.Line})
	}
	return out
}

// items returns the entries of an optional list.
func (p *permifyParser) items(what string, n *yaml.Node) []*yaml.Node {
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.probs.add(p.pos(n), "%s: expected a list, found %s", what, kindName(n))
		return nil
	}
	return n.Content
}

func (p *permifyParser) top(n *yaml.Node) {
	top := p.fields("file", n, "schema", "relationships", "attributes", "scenarios")
	if s := top["schema"]; s != nil {
		p.decode("schema", s, &p.f.Schema)
		p.f.schemaLoc = newLocator(p.name, p.src, s)
		if isSchemaPath(p.f.Schema) {
			p.f.SchemaPath, p.f.Schema = strings.TrimSpace(p.f.Schema), ""
		}
	}
	p.f.Relationships = p.lines("relationships", top["relationships"])
	p.f.Attributes = p.lines("attributes", top["attributes"])
	for _, s := range p.items("scenarios", top["scenarios"]) {
		p.f.Scenarios = append(p.f.Scenarios, p.scenario(s))
	}
}

func (p *permifyParser) scenario(n *yaml.Node) Scenario {
	fs := p.fields("scenario", n, "name", "description", "checks", "entity_filters", "subject_filters")
	var sc Scenario
	p.decode("name", fs["name"], &sc.Name)
	p.decode("description", fs["description"], &sc.Description)
	for _, c := range p.items("checks", fs["checks"]) {
		cf := p.fields("check", c, "entity", "subject", "context", "assertions")
		pc := PermifyCheck{Line: c.Line, Context: p.context(cf["context"]), Expect: expectations[bool](p, cf["assertions"])}
		p.decode("entity", cf["entity"], &pc.Entity)
		p.decode("subject", cf["subject"], &pc.Subject)
		sc.Checks = append(sc.Checks, pc)
	}
	for _, c := range p.items("entity_filters", fs["entity_filters"]) {
		flt, cf := p.filter("entity filter", c, "entity_type", "subject")
		p.decode("entity_type", cf["entity_type"], &flt.EntityType)
		p.decode("subject", cf["subject"], &flt.Subject)
		sc.EntityFilters = append(sc.EntityFilters, flt)
	}
	for _, c := range p.items("subject_filters", fs["subject_filters"]) {
		flt, cf := p.filter("subject filter", c, "subject_reference", "entity")
		p.decode("subject_reference", cf["subject_reference"], &flt.Subject)
		p.decode("entity", cf["entity"], &flt.Entity)
		sc.SubjectFilters = append(sc.SubjectFilters, flt)
	}
	return sc
}

// filter reads what both kinds of filter share and returns the fields, of which the
// caller reads its two own keys.
func (p *permifyParser) filter(what string, n *yaml.Node, keys ...string) (Filter, map[string]*yaml.Node) {
	cf := p.fields(what, n, append(keys, "context", "assertions")...)
	return Filter{Line: n.Line, Context: p.context(cf["context"]), Expect: expectations[[]string](p, cf["assertions"])}, cf
}

func (p *permifyParser) context(n *yaml.Node) PermifyContext {
	if n == nil {
		return PermifyContext{}
	}
	fs := p.fields("context", n, "tuples", "attributes", "data")
	c := PermifyContext{Tuples: p.lines("context tuples", fs["tuples"]), Attributes: p.lines("context attributes", fs["attributes"])}
	p.decode("context data", fs["data"], &c.Data)
	return c
}

// expectations reads a `permission: value` mapping in file order.
func expectations[T any](p *permifyParser, n *yaml.Node) []Expected[T] {
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.probs.add(p.pos(n), "assertions: expected a mapping of permission to expected answer, found %s", kindName(n))
		return nil
	}
	var out []Expected[T]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var want T
		if err := v.Decode(&want); err != nil {
			p.probs.add(p.pos(v), "assertion %q: %s", k.Value, strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "))
			continue
		}
		out = append(out, Expected[T]{Permission: k.Value, Want: want, Line: k.Line})
	}
	return out
}
