package playground

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// fileName is what the validation file is called in messages and downloads.
const fileName = "playground.yaml"

// Editors of the page, as failures name them.
const (
	edSchema        = "schema"
	edRelationships = "relationships"
	edAssertions    = "assertions"
	edValidation    = "validation"
)

// composed is a validation file written from the page's editors, with where each
// editor's lines landed, so that a problem the runner reports at a file line is
// shown under the editor line it came from.
type composed struct {
	text  strings.Builder
	line  int // lines written so far
	spans []span
}

// span maps file lines first..first+len(lines)-1 to lines of one editor.
type span struct {
	editor string
	first  int
	lines  []int // editor line of each file line
}

// locate returns the editor and editor line of file line n, or "" and 0.
func (c *composed) locate(n int) (string, int) {
	for _, s := range c.spans {
		if n >= s.first && n < s.first+len(s.lines) {
			return s.editor, s.lines[n-s.first]
		}
	}
	return "", 0
}

func (c *composed) writeLine(s string) {
	c.text.WriteString(s)
	c.text.WriteByte('\n')
	c.line++
}

// block writes `key: |` and text as a literal block scalar that decodes to exactly
// text: the chomping indicator keeps its trailing line breaks, and an indentation
// indicator is added when its first line starts with a blank.
func (c *composed) block(key, editor, text string) {
	if text == "" {
		c.writeLine(key + `: ""`)
		return
	}
	body := strings.TrimRight(text, "\n")
	header := key + ": |"
	// YAML guesses a block's indentation from its first non-empty line, which only
	// works when that line starts with what it holds rather than more blanks.
	first := strings.TrimLeft(body, "\n")
	if strings.HasPrefix(first, " ") || strings.HasPrefix(first, "\t") {
		header += "2"
	}
	// Clipping keeps one line break, but none of a text that is only line breaks.
	switch trailing := len(text) - len(body); {
	case trailing == 0:
		header += "-"
	case trailing > 1 || body == "":
		header += "+"
	}
	c.writeLine(header)
	lines := strings.Split(body, "\n")
	for range len(text) - len(body) - 1 {
		lines = append(lines, "")
	}
	c.nested(editor, lines)
}

// nested writes lines indented under the key just written.
func (c *composed) nested(editor string, lines []string) {
	s := span{editor: editor, first: c.line + 1}
	for i, l := range lines {
		if l != "" {
			l = "  " + l
		}
		c.writeLine(l)
		s.lines = append(s.lines, i+1)
	}
	c.spans = append(c.spans, s)
}

// mapping writes `key:` and the editor's YAML text nested under it, or nothing
// when the editor is empty.
func (c *composed) mapping(key, editor, text string) {
	text = strings.TrimRight(text, " \t\n")
	if strings.TrimSpace(text) == "" {
		return
	}
	c.writeLine(key + ":")
	c.nested(editor, strings.Split(text, "\n"))
}

// composeSpiceDB writes SpiceDB's validation file: schema, relationships, assertions
// and expected relations (`validation`).
func composeSpiceDB(req *request) *composed {
	c := &composed{}
	c.block("schema", edSchema, req.Schema)
	c.block("relationships", edRelationships, req.Relationships)
	c.mapping("assertions", edAssertions, req.Assertions)
	c.mapping("validation", edValidation, req.Validation)
	return c
}

// composePermify writes Permify's validation file: schema, relationships and
// attributes as lists (one entry per non-blank, non-comment line of the relationships
// editor) and scenarios.
func composePermify(req *request) *composed {
	c := &composed{}
	c.block("schema", edSchema, req.Schema)
	c.list("relationships", req.Relationships, func(l string) bool { return !isAttribute(permify, l) })
	c.list("attributes", req.Relationships, func(l string) bool { return isAttribute(permify, l) })
	c.mapping("scenarios", edAssertions, req.Assertions)
	return c
}

// list writes `key:` and, one entry each, the relationships editor's lines that keep
// holds, or nothing when there are none.
func (c *composed) list(key, text string, keep func(string) bool) {
	s := span{editor: edRelationships}
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") || !keep(l) {
			continue
		}
		if s.first == 0 {
			c.writeLine(key + ":")
			s.first = c.line + 1
		}
		c.writeLine("  - " + strconv.Quote(l))
		s.lines = append(s.lines, i+1)
	}
	c.spans = append(c.spans, s)
}

// imported is a validation file split back into the page's editors.
type imported struct {
	Language      string `json:"language"`
	Schema        string `json:"schema"`
	Relationships string `json:"relationships"`
	Assertions    string `json:"assertions"`
	Validation    string `json:"validation"`
}

// decompose splits a SpiceDB or Permify validation file into the editors. Nested
// sections (assertions, validation, scenarios) keep their text as written, comments
// included, so that a file the playground wrote comes back unchanged.
func decompose(src string) (imported, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return imported{}, &requestError{"not a validation file: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return imported{}, &requestError{"not a validation file: expected a mapping with keys schema, relationships, assertions, validation (or Permify's scenarios)"}
	}
	top := doc.Content[0]
	lines := strings.Split(src, "\n")
	var out imported
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		end := len(lines)
		if i+2 < len(top.Content) {
			end = top.Content[i+2].Line - 1
		}
		if err := out.set(k, v, lines[:end]); err != nil {
			return imported{}, err
		}
	}
	if out.Language == "" {
		out.Language = detectLanguage(out.Schema)
	}
	return out, nil
}

func (out *imported) set(k, v *yaml.Node, lines []string) error {
	switch k.Value {
	case "schema":
		out.Schema = v.Value
	case "relationships", "attributes":
		// Permify's attributes go in the relationships editor, after the relationships.
		text := v.Value
		if v.Kind == yaml.SequenceNode {
			items := make([]string, len(v.Content))
			for i, n := range v.Content {
				items[i] = n.Value
			}
			text = strings.Join(items, "\n")
		}
		if k.Value == "attributes" {
			out.Language = permify
		}
		if out.Relationships != "" && text != "" {
			text = out.Relationships + "\n" + text
		}
		out.Relationships = text
	case "assertions":
		out.Assertions = nestedText(k, v, lines)
	case "validation":
		out.Validation = nestedText(k, v, lines)
	case "scenarios":
		out.Language = permify
		out.Assertions = nestedText(k, v, lines)
	case "schemaFile":
		return &requestError{"schemaFile: the playground cannot read other files; paste the schema into the file's schema key"}
	default:
		return &requestError{fmt.Sprintf("unknown key %q (expected schema, relationships, assertions, validation or scenarios)", k.Value)}
	}
	return nil
}

// nestedText returns the source lines of v, the value of top-level key k (lines ends
// before the next key), dedented; a value on k's own line is re-rendered instead.
func nestedText(k, v *yaml.Node, lines []string) string {
	if v.Line == k.Line {
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return ""
		}
		b, err := yaml.Marshal(v)
		if err != nil {
			return v.Value
		}
		return strings.TrimRight(string(b), "\n")
	}
	body := lines[k.Line:]
	for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
		body = body[:len(body)-1]
	}
	indent := -1
	for _, l := range body {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	out := make([]string, len(body))
	for i, l := range body {
		if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
			out[i] = l[indent:]
		} else {
			out[i] = strings.TrimLeft(l, " ")
		}
	}
	return strings.Join(out, "\n")
}
