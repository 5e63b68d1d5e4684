package bench

import (
	"errors"
	"fmt"
	"strings"
)

// Template is a resource or subject with an id drawn from a generator:
// `content:c{contents}` or `group:g{groups}#member`. Prefix and Suffix surround the
// drawn number; without a generator the id is the literal Prefix.
type Template struct {
	Type, Relation string
	Prefix, Suffix string
	Generator      string
}

// ParseTemplate parses s. typeOnly templates name just an object type (`content`), or
// a type and a relation (`group#member`), as lookups take.
func ParseTemplate(s string, typeOnly bool) (Template, error) {
	var t Template
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s, t.Relation = s[:i], s[i+1:]
		if t.Relation == "" {
			return t, errors.New("empty relation after #")
		}
	}
	if typeOnly {
		if strings.ContainsAny(s, ":{}") || s == "" {
			return t, fmt.Errorf("want just an object type here, like content, got %q", s)
		}
		t.Type = s
		return t, nil
	}
	typ, id, ok := strings.Cut(s, ":")
	if !ok || typ == "" || id == "" {
		return t, fmt.Errorf("want type:id, like user:u{users}, got %q", s)
	}
	t.Type = typ
	open := strings.IndexByte(id, '{')
	if open < 0 {
		if strings.ContainsRune(id, '}') {
			return t, fmt.Errorf("%q has } without {", id)
		}
		t.Prefix = id
		return t, nil
	}
	end := strings.IndexByte(id[open:], '}')
	if end < 0 {
		return t, fmt.Errorf("%q has { without }", id)
	}
	t.Prefix, t.Generator, t.Suffix = id[:open], id[open+1:open+end], id[open+end+1:]
	if t.Generator == "" || strings.ContainsAny(t.Suffix, "{}") {
		return t, fmt.Errorf("%q must hold exactly one {generator}", id)
	}
	return t, nil
}

// String is the template's text.
func (t Template) String() string {
	s := t.Type
	if t.Prefix != "" || t.Generator != "" {
		s += ":" + t.Prefix
		if t.Generator != "" {
			s += "{" + t.Generator + "}" + t.Suffix
		}
	}
	if t.Relation != "" {
		s += "#" + t.Relation
	}
	return s
}
