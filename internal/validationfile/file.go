// Package validationfile owns validation files. SpiceDB's format is YAML holding a
// schema, relationships, assertions (`assertTrue`, `assertFalse`, `assertCaveated`) and
// expected relations (the `validation` section, with zed's semantics); Permify's holds
// a schema, relationships, attributes and scenarios. The package parses them, naming
// the file line of every problem, runs them in-process against a fresh memory store and
// the engine, reports every expectation that does not hold, and renders the expected
// relations a file's data actually gives (`latch validate --update`).
package validationfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
)

// Expectation is what an assertion expects a check to answer.
type Expectation int

const (
	// ExpectTrue (assertTrue) expects HAS_PERMISSION.
	ExpectTrue Expectation = iota + 1
	// ExpectFalse (assertFalse) expects NO_PERMISSION.
	ExpectFalse
	// ExpectCaveated (assertCaveated) expects CONDITIONAL_PERMISSION.
	ExpectCaveated
)

// String returns the YAML key the expectation is written under.
func (e Expectation) String() string {
	switch e {
	case ExpectTrue:
		return "assertTrue"
	case ExpectFalse:
		return "assertFalse"
	case ExpectCaveated:
		return "assertCaveated"
	}
	return fmt.Sprintf("Expectation(%d)", int(e))
}

// Membership is the check answer that satisfies e.
func (e Expectation) Membership() engine.Membership {
	switch e {
	case ExpectTrue:
		return engine.HasPermission
	case ExpectCaveated:
		return engine.Conditional
	}
	return engine.NoPermission
}

var expectationKeys = map[string]Expectation{
	ExpectTrue.String():     ExpectTrue,
	ExpectFalse.String():    ExpectFalse,
	ExpectCaveated.String(): ExpectCaveated,
}

// Relationship is one relationship of the file with the line it was written on.
type Relationship struct {
	Relationship rel.Relationship
	Text         string
	Line         int
}

// Assertion is one assertion of the file.
type Assertion struct {
	Expect Expectation
	Text   string // as written: `document:1#view@user:a with {"x": 1}`
	Line   int
	Check  engine.CheckRequest
}

// File is a parsed validation file.
type File struct {
	// Name is the path or name messages refer to the file by.
	Name string
	// Schema is the schema text (from `schema`, or read from `schemaFile` by Load).
	Schema string
	// SchemaFile is the `schemaFile` key as written, relative to the file's directory.
	SchemaFile    string
	Relationships []Relationship
	Assertions    []Assertion
	// Validation is SpiceDB's `validation` section (expected relations), in file order.
	Validation []ExpectedRelation

	schemaLoc locator
}

// topLevelKeys lists the keys a file may hold, for the unknown-key message.
const topLevelKeys = "schema, schemaFile, relationships, assertions, validation"

// Load reads and parses the file at path. A `schemaFile` is read relative to the
// file's directory and may not reach outside it.
func Load(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, src)
	if err != nil {
		return nil, err
	}
	if f.SchemaFile != "" {
		if err := f.loadSchemaFile(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// loadSchemaFile reads f.SchemaFile through an os.Root so that `../../etc/passwd`
// cannot be read by a validation file someone else wrote.
func (f *File) loadSchemaFile(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	text, err := root.ReadFile(filepath.FromSlash(f.SchemaFile))
	if err != nil {
		return &ProblemsError{Problems: []Problem{{File: f.Name, Msg: fmt.Sprintf("schemaFile %q: %v", f.SchemaFile, err)}}}
	}
	f.Schema = string(text)
	f.schemaLoc = identityLocator(filepath.Join(dir, f.SchemaFile), f.Schema)
	return nil
}

// Parse parses a validation file's text; name is used in messages. It reads nothing
// from disk: a `schemaFile` is only recorded (Load reads it). Every problem found is
// reported in a *ProblemsError.
func Parse(name string, src []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, &ProblemsError{Problems: []Problem{{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}}
	}
	p := &parser{yamlReader: yamlReader{name: name, src: src}, f: &File{Name: name}}
	p.document(&doc)
	if err := p.probs.err(); err != nil {
		return nil, err
	}
	return p.f, nil
}

// yamlReader is what reading either format's YAML needs: the file's name and text,
// and the problems found so far.
type yamlReader struct {
	name  string
	src   []byte
	probs problems
	lines int // of src, once pos has counted them
}

// pos is n's position. yaml.v3 places the empty node that follows a bare document
// marker ("---" at the end) on the line after the file's last; that is the last line.
func (p *yamlReader) pos(n *yaml.Node) position {
	if p.lines == 0 {
		p.lines = bytes.Count(p.src, []byte("\n")) + 1
	}
	if n.Line > p.lines {
		return position{File: p.name, Line: p.lines, Col: 1}
	}
	return position{File: p.name, Line: n.Line, Col: n.Column}
}

// parser holds the state of one Parse.
type parser struct {
	yamlReader
	f *File
}

func (p *parser) document(doc *yaml.Node) {
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.probs.add(position{File: p.name}, "file is empty: expected keys %s", topLevelKeys)
		return
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		p.probs.add(p.pos(top), "expected a mapping with keys %s", topLevelKeys)
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if seen[k.Value] {
			p.probs.add(p.pos(k), "key %q appears twice", k.Value)
			continue
		}
		seen[k.Value] = true
		p.topLevel(k, v)
	}
	if p.f.Schema != "" && p.f.SchemaFile != "" {
		p.probs.add(position{File: p.name}, "both schema and schemaFile are set: use one")
	}
}

func (p *parser) topLevel(k, v *yaml.Node) {
	switch k.Value {
	case "schema":
		if s, ok := p.scalar(k.Value, v); ok {
			p.f.Schema = s
			p.f.schemaLoc = newLocator(p.name, p.src, v)
		}
	case "schemaFile":
		if s, ok := p.scalar(k.Value, v); ok {
			p.f.SchemaFile = s
		}
	case "relationships":
		if s, ok := p.scalar(k.Value, v); ok {
			p.relationships(s, newLocator(p.name, p.src, v))
		}
	case "assertions":
		p.assertions(v)
	case "validation":
		p.validation(v)
	default:
		p.probs.add(p.pos(k), "unknown key %q (expected %s)", k.Value, topLevelKeys)
	}
}

// scalar returns v's text; null is "".
func (p *parser) scalar(key string, v *yaml.Node) (string, bool) {
	if isNull(v) {
		return "", true
	}
	if v.Kind != yaml.ScalarNode {
		p.probs.add(p.pos(v), "%s: expected text, found %s", key, kindName(v))
		return "", false
	}
	return v.Value, true
}

func isNull(v *yaml.Node) bool {
	return v.Kind == yaml.ScalarNode && v.Tag == "!!null"
}

func kindName(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "text"
}
