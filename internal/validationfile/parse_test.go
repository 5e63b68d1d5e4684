package validationfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
)

const goodFile = `---
schema: |-
  definition user {}

  caveat only_on(day string) {
    day == "tuesday"
  }

  definition document {
    relation viewer: user | user with only_on
    permission view = viewer
  }
relationships: >-
  document:1#viewer@user:alice

  document:1#viewer@user:bob[only_on]

  // a comment line (in a folded block, comments need a blank line after them)

  document:2#viewer@user:carol[only_on:{"day": "tuesday"}] document:3#viewer@user:dan
assertions:
  assertTrue:
    - document:1#view@user:alice
    - 'document:1#view@user:bob with {"day": "tuesday"}'
  assertFalse:
    - document:1#view@user:carol
  assertCaveated:
    - document:1#view@user:bob
validation: null
`

func TestParseGoodFile(t *testing.T) {
	f, err := Parse("good.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.Schema, "definition user {}") {
		t.Errorf("schema = %q", f.Schema)
	}
	wantRels := []struct {
		text string
		line int
	}{
		{"document:1#viewer@user:alice", 14},
		{"document:1#viewer@user:bob[only_on]", 16},
		{`document:2#viewer@user:carol[only_on:{"day": "tuesday"}]`, 20},
		{"document:3#viewer@user:dan", 20},
	}
	if len(f.Relationships) != len(wantRels) {
		t.Fatalf("got %d relationships, want %d: %+v", len(f.Relationships), len(wantRels), f.Relationships)
	}
	for i, w := range wantRels {
		got := f.Relationships[i]
		if got.Text != w.text || got.Line != w.line {
			t.Errorf("relationship %d = %q on line %d, want %q on line %d", i, got.Text, got.Line, w.text, w.line)
		}
	}
	if c := f.Relationships[2].Relationship.Caveat; c == nil || c.Name != "only_on" || c.Context["day"] != "tuesday" {
		t.Errorf("caveat of relationship 2 = %+v", c)
	}
	wantAsserts := []struct {
		expect Expectation
		line   int
		ctx    bool
	}{{ExpectTrue, 23, false}, {ExpectTrue, 24, true}, {ExpectFalse, 26, false}, {ExpectCaveated, 28, false}}
	if len(f.Assertions) != len(wantAsserts) {
		t.Fatalf("got %d assertions, want %d", len(f.Assertions), len(wantAsserts))
	}
	for i, w := range wantAsserts {
		a := f.Assertions[i]
		if a.Expect != w.expect || a.Line != w.line || (a.Check.Context != nil) != w.ctx {
			t.Errorf("assertion %d = %v on line %d (context %v), want %v on line %d", i, a.Expect, a.Line, a.Check.Context, w.expect, w.line)
		}
	}
	want := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "bob"}}
	if got := f.Assertions[1].Check.Subject; got != want {
		t.Errorf("subject of assertion 1 = %+v, want %+v", got, want)
	}
	if f.Validation != nil {
		t.Errorf("validation: null kept as %v", f.Validation)
	}
}

// problemsOf returns err's problems rendered, failing the test when err is not a
// *ProblemsError.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ProblemsError", err, err)
	}
	out := make([]string, len(pe.Problems))
	for i, p := range pe.Problems {
		out[i] = p.String()
	}
	return out
}

func TestParseReportsEveryProblemWithItsLine(t *testing.T) {
	src := `schema: "definition user {}"
relationships: |
  document:1#viewer@user:alice
  document:1#viewer
  not a relationship
assertions:
  assertTrue:
    - document:1#view@user:alice
    - document:1#view
  assertMaybe: []
extra: 1
`
	_, err := Parse("bad.yaml", []byte(src))
	got := problemsOf(t, err)
	want := []string{
		`bad.yaml:4:3: relationship "document:1#viewer"`,
		`bad.yaml:5:3: relationship "not"`,
		`bad.yaml:5:7: relationship "a"`,
		`bad.yaml:5:9: relationship "relationship"`,
		`bad.yaml:9:7: assertTrue: check "document:1#view"`,
		`bad.yaml:10:3: assertions: unknown key "assertMaybe"`,
		`bad.yaml:11:1: unknown key "extra"`,
	}
	if len(got) != len(want) {
		t.Fatalf("got problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

func TestParseRejectsShapes(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"empty", "", "file is empty"},
		{"not a mapping", "- a\n", "expected a mapping"},
		{"yaml syntax", "schema: [\n", "bad.yaml: "},
		{"duplicate key", "schema: a\nschema: b\n", `key "schema" appears twice`},
		{"schema is a list", "schema: [a]\n", "schema: expected text, found a list"},
		{"assertions is a list", "assertions: [a]\n", "assertions: expected a mapping"},
		{"assertion is a mapping", "assertions:\n  assertTrue:\n    - {a: b}\n", "assertTrue: expected an assertion"},
		{"both schemas", "schema: a\nschemaFile: b.zed\n", "both schema and schemaFile"},
		{"validation shape", "validation: [a]\n", "validation: expected a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.src))
			got := strings.Join(problemsOf(t, err), "\n")
			if !strings.Contains(got, tc.want) {
				t.Errorf("problems %q do not mention %q", got, tc.want)
			}
		})
	}
}

func TestParseExpectedRelations(t *testing.T) {
	f, err := Parse("v.yaml", []byte("validation:\n  document:1#view:\n    - '[user:alice] is <document:1#viewer>'\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := ExpectedRelation{
		Key: "document:1#view", Resource: rel.ObjectRef{Type: "document", ID: "1"}, Permission: "view", Line: 2, Col: 3,
		Subjects: []ExpectedSubject{{
			Text: "[user:alice] is <document:1#viewer>", Line: 3, Col: 7,
			Subject: SubjectText{Subject: "user:alice"}, Resources: []string{"document:1#viewer"},
		}},
	}
	if len(f.Validation) != 1 || !reflect.DeepEqual(f.Validation[0], want) {
		t.Errorf("validation = %+v, want %+v", f.Validation, want)
	}
}

func TestLoadSchemaFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("s.zed", "definition user {}\n")
	f, err := Load(write("ok.yaml", "schemaFile: s.zed\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Schema != "definition user {}\n" {
		t.Errorf("schema = %q", f.Schema)
	}
	_, err = Load(write("escape.yaml", "schemaFile: ../outside.zed\n"))
	if got := strings.Join(problemsOf(t, err), "\n"); !strings.Contains(got, `schemaFile "../outside.zed"`) {
		t.Errorf("escaping schemaFile: %q", got)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseExpectedSubject(t *testing.T) {
	for text, want := range map[string]ExpectedSubject{
		"[user:tom] is <document:1#writer>": {Subject: SubjectText{Subject: "user:tom"}, Resources: []string{"document:1#writer"}},
		"[group:eng#member] is <document:1#viewer>/<folder:f#viewer>": {
			Subject: SubjectText{Subject: "group:eng#member"}, Resources: []string{"document:1#viewer", "folder:f#viewer"},
		},
		"[user:tom[...]] is <document:1#viewer>": {Subject: SubjectText{Subject: "user:tom", Caveated: true}, Resources: []string{"document:1#viewer"}},
		"[user:*[...] - {user:bob, user:ann[...]}] is <document:1#viewer>": {
			Subject:   SubjectText{Subject: "user:*", Caveated: true, Excluded: []SubjectText{{Subject: "user:bob"}, {Subject: "user:ann", Caveated: true}}},
			Resources: []string{"document:1#viewer"},
		},
		// As in zed, text around the <...> is not read, and they may be missing.
		"[user:tom#...]": {Subject: SubjectText{Subject: "user:tom"}},
	} {
		want.Text = text
		got, err := parseExpectedSubject(text)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseExpectedSubject(%q) = %+v, %v; want %+v", text, got, err, want)
		}
		if err == nil && len(want.Resources) > 0 && subjectLine(got.Subject, got.Resources) != text {
			t.Errorf("%q renders as %q", text, subjectLine(got.Subject, got.Resources))
		}
	}
	for text, want := range map[string]string{
		"user:tom is <document:1#writer>":         "expected \"[subject] is <type:id#relation>\"",
		"[user:tom is <document:1#writer>":        "expected \"[subject] is <type:id#relation>\"",
		"[user:tom] is <document:1>":              "expected type:id#relation",
		"[user:* - user:bob] is <document:1#abc>": "expected excluded subjects written as - {type:id, ...}",
		"[user] is <document:1#abc>":              "expected type:id",
		"[user:tom] is <document:1#abc>/<user:*>": "expected type:id#relation",
	} {
		if _, err := parseExpectedSubject(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseExpectedSubject(%q) error %v, want one containing %q", text, err, want)
		}
	}
}

func TestParseValidationProblems(t *testing.T) {
	src := "validation:\n  document:1:\n    - '[user:a] is <document:1#v>'\n  document:2#view: '[user:a]'\n  document:3#view:\n    - '[user:a'\n  document:3#view: []\n"
	got := strings.Join(problemsOf(t, func() error { _, err := Parse("v.yaml", []byte(src)); return err }()), "\n")
	for _, want := range []string{
		`v.yaml:2:3: validation: "document:1": expected "type:id#permission"`,
		`v.yaml:4:20: validation: document:2#view: expected a list of subjects`,
		`v.yaml:6:7: validation: document:3#view: "[user:a": expected`,
		`v.yaml:7:3: validation: "document:3#view" appears twice (first on line 5)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\ndo not contain %q", got, want)
		}
	}
}
