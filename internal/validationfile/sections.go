package validationfile

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
)

// relationships parses the `relationships` text: one relationship a line, blank lines
// and `//` comment lines ignored. Folded YAML (`>-`) joins adjacent lines with a space,
// so a line may also hold several relationships separated by whitespace; whitespace
// inside a caveat's `[...]` (its JSON context) does not separate them.
func (p *parser) relationships(text string, loc locator) {
	lineStart := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		start := lineStart
		lineStart += len(line)
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "//") {
			continue
		}
		for _, e := range splitEntries(line) {
			p.relationship(line[e.start:e.end], loc.at(start+e.start))
		}
	}
}

func (p *parser) relationship(text string, pos position) {
	r, err := rel.Parse(text)
	if err != nil {
		p.probs.add(pos, "%v", err) // rel.Parse names the relationship
		return
	}
	p.f.Relationships = append(p.f.Relationships, Relationship{Relationship: r, Text: text, Line: pos.Line})
}

// span is a half-open byte range.
type span struct{ start, end int }

// splitEntries splits s at whitespace that is outside brackets, braces and JSON strings.
func splitEntries(s string) []span {
	var out []span
	depth, start := 0, -1
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			inString, escaped = inStringStep(c, escaped)
		case c == '"' && depth > 0:
			inString = true
		case c == '[' || c == '{':
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
		case isSpace(c) && depth == 0:
			if start >= 0 {
				out = append(out, span{start, i})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, span{start, len(s)})
	}
	return out
}

// inStringStep advances through a JSON string by one byte: it reports whether the
// string continues and whether the next byte is escaped.
func inStringStep(c byte, escaped bool) (inString, nextEscaped bool) {
	switch {
	case escaped:
		return true, false
	case c == '\\':
		return true, true
	case c == '"':
		return false, false
	}
	return true, false
}

// assertions parses the `assertions` mapping: assertTrue, assertFalse and
// assertCaveated, each a list of `resource#permission@subject [with {json}]`.
func (p *parser) assertions(v *yaml.Node) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		p.probs.add(p.pos(v), "assertions: expected a mapping with keys assertTrue, assertFalse, assertCaveated, found %s", kindName(v))
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, list := v.Content[i], v.Content[i+1]
		expect, ok := expectationKeys[k.Value]
		if !ok {
			p.probs.add(p.pos(k), "assertions: unknown key %q (expected assertTrue, assertFalse, assertCaveated)", k.Value)
			continue
		}
		p.assertionList(expect, list)
	}
}

func (p *parser) assertionList(expect Expectation, list *yaml.Node) {
	if isNull(list) {
		return
	}
	if list.Kind != yaml.SequenceNode {
		p.probs.add(p.pos(list), "%s: expected a list of assertions, found %s", expect, kindName(list))
		return
	}
	for _, item := range list.Content {
		if item.Kind != yaml.ScalarNode {
			p.probs.add(p.pos(item), "%s: expected an assertion like \"document:1#view@user:alice\", found %s", expect, kindName(item))
			continue
		}
		p.assertion(expect, item)
	}
}

func (p *parser) assertion(expect Expectation, item *yaml.Node) {
	text := strings.TrimSpace(item.Value)
	resource, permission, subject, context, err := rel.ParseCheck(text)
	if err != nil {
		p.probs.add(p.pos(item), "%s: %v", expect, err)
		return
	}
	p.f.Assertions = append(p.f.Assertions, Assertion{
		Expect: expect,
		Text:   text,
		Line:   item.Line,
		Check:  engine.CheckRequest{Resource: resource, Permission: permission, Subject: subject, Context: context},
	})
}
