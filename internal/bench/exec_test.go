package bench

import (
	"strconv"
	"testing"
)

// TestIDTable: every id of a template, interned or formatted as drawn past the table,
// is its prefix, number and suffix; a literal id has no table.
func TestIDTable(t *testing.T) {
	for _, tc := range []struct {
		tmpl Template
		n    int
	}{
		{Template{Type: "document", Prefix: "d", Generator: "doc"}, 1200},
		{Template{Type: "user", Prefix: "tenant1/u", Suffix: "-x", Generator: "user"}, 37},
		{Template{Type: "group", Generator: "g"}, 11},
	} {
		tbl := newIDTable(tc.tmpl, tc.n)
		if len(tbl.ends) != tc.n {
			t.Fatalf("%+v: %d ids interned, want %d", tc.tmpl, len(tbl.ends), tc.n)
		}
		for i := range tc.n + 5 {
			if got, want := tbl.get(i), tc.tmpl.Prefix+strconv.Itoa(i)+tc.tmpl.Suffix; got != want {
				t.Fatalf("%+v: id %d is %q, want %q", tc.tmpl, i, got, want)
			}
		}
	}
	if tbl := newIDTable(Template{Type: "user", Prefix: "u"}, 10); tbl.ends != nil {
		t.Fatalf("a literal id (no generator): %d ids interned", len(tbl.ends))
	}
}
