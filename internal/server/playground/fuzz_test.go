package playground

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzExportImport: any schema and relationships text a person can type comes back
// unchanged from the file the playground writes.
func FuzzExportImport(f *testing.F) {
	f.Add(docSchema, "document:1#viewer@user:a\n")
	f.Add("  indented first line\n\n\n", "\n\nx\n\n")
	f.Add("", " ")
	f.Add("a\n  b\n\tc", "#x: y\n- z\n'q'")
	f.Fuzz(func(t *testing.T, schema, rels string) {
		if !typeable(schema) || !typeable(rels) {
			t.Skip()
		}
		c := composeSpiceDB(&request{Schema: schema, Relationships: rels})
		got, err := decompose(c.text.String())
		if err != nil {
			t.Fatalf("exported\n%s\ndoes not load: %v", c.text.String(), err)
		}
		if got.Schema != schema || got.Relationships != rels {
			t.Fatalf("exported\n%s\nloaded as %q, %q; want %q, %q", c.text.String(), got.Schema, got.Relationships, schema, rels)
		}
	})
}

// typeable reports whether s is text an editor holds: valid UTF-8, printable
// characters, tabs and line feeds (the page turns other line breaks into \n).
func typeable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return r != '\n' && r != '\t' && !unicode.IsPrint(r) && r != ' '
	})
}
