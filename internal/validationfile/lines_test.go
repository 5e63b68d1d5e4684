package validationfile

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestWordIndex(t *testing.T) {
	const s = "ab  cd\nef"
	for _, tc := range []struct {
		off, word, inWord int
	}{
		{0, 0, 0},
		{1, 0, 1},
		{2, 1, 0}, // on whitespace: the next word
		{4, 1, 0},
		{5, 1, 1},
		{7, 2, 0},
		{9, 2, 2}, // past the end: the end of the last word
	} {
		word, in := wordIndex(s, tc.off)
		if word != tc.word || in != tc.inWord {
			t.Errorf("wordIndex(%q, %d) = %d, %d; want %d, %d", s, tc.off, word, in, tc.word, tc.inWord)
		}
	}
}

// locate decodes src, finds the value of key in its top mapping and returns the
// position of the first occurrence of needle in that value.
func locate(t *testing.T, src, key, needle string) position {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != key {
			continue
		}
		v := top.Content[i+1]
		off := strings.Index(v.Value, needle)
		if off < 0 {
			t.Fatalf("%q not in value %q", needle, v.Value)
		}
		return newLocator("f.yaml", []byte(src), v).at(off)
	}
	t.Fatalf("no key %q", key)
	return position{}
}

func TestLocatorBlockStyles(t *testing.T) {
	const literal = "schema: |+\n  definition user {}\n\n  definition doc {\n  \trelation viewer: user\n  }\nother: x\n"
	const folded = "rels: >-\n  doc:1#viewer@user:a\n\n  doc:2#viewer@user:b[c:{\"k\": [1, 2]}]\n\n  doc:3#viewer@user:c\n"
	const foldedIndented = "schema: >-\n  definition doc {\n    relation viewer: user\n\n    permission view = viewer\n  }\n"
	for _, tc := range []struct {
		name, src, key, needle string
		line, col              int
	}{
		{"literal first line", literal, "schema", "definition user", 2, 3},
		{"literal tab-indented", literal, "schema", "relation viewer", 5, 4},
		{"literal mid-word", literal, "schema", "ewer", 5, 15},
		{"folded first", folded, "rels", "doc:1", 2, 3},
		{"folded after blank line", folded, "rels", "doc:2", 4, 3},
		{"folded after caveat with spaces", folded, "rels", "doc:3", 6, 3},
		{"folded more-indented", foldedIndented, "schema", "permission view", 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := locate(t, tc.src, tc.key, tc.needle)
			if got.Line != tc.line || got.Col != tc.col {
				t.Errorf("%q is at %d:%d, want %d:%d", tc.needle, got.Line, got.Col, tc.line, tc.col)
			}
		})
	}
}

func TestLocatorPlainScalarUsesItsLine(t *testing.T) {
	got := locate(t, "a: 1\nschema: \"definition user {}\"\n", "schema", "user")
	if got.Line != 2 || got.Col != 0 {
		t.Errorf("got %d:%d, want line 2 with no column", got.Line, got.Col)
	}
}

func TestAtLineCol(t *testing.T) {
	const src = "schema: |-\n  definition user {}\n  definition doc {\n    relation viewer: usr\n  }\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	loc := newLocator("f.yaml", []byte(src), doc.Content[0].Content[1])
	// "usr" is on line 3, column 20 of the schema text.
	got := loc.atLineCol(3, 20)
	if got.Line != 4 || got.Col != 22 {
		t.Errorf("got %d:%d, want 4:22", got.Line, got.Col)
	}
	// Past the end of the text: the end of the last word.
	if got := loc.atLineCol(9, 1); got.Line != 5 {
		t.Errorf("past the end: got line %d, want 5", got.Line)
	}
}
