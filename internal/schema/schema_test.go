package schema

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// sharedDir is the shared folder beside the repository root.
const sharedDir = "../../../shared"

// sharedSchemas returns every schema the shared conformance data and workloads hold,
// keyed by folder and file name. Files with no top-level `schema` (OpenFGA's suite in
// conformance/openfga, whose models are in OpenFGA's language, per stage) are not
// schemas of latch's languages and are left out.
func sharedSchemas(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sharedDir, "conformance/*/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Skipf("shared conformance data not found (%v)", err)
	}
	out := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Schema string `yaml:"schema"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.TrimSpace(doc.Schema) == "" {
			continue
		}
		out[filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)] = doc.Schema
	}
	if raw, err := os.ReadFile(filepath.Join(sharedDir, "workloads/social/schema.zed")); err == nil {
		out["social/schema.zed"] = string(raw)
	}
	return out
}

func TestSharedSchemasCompile(t *testing.T) {
	for name, src := range sharedSchemas(t) {
		t.Run(name, func(t *testing.T) {
			s, err := Compile(src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if len(s.Definitions) == 0 {
				t.Fatal("no definitions")
			}
			if w := Warnings(src); len(w) != 0 {
				t.Logf("warnings: %v", w)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for name, src := range sharedSchemas(t) {
		t.Run(name, func(t *testing.T) {
			first, err := Compile(src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			text := Format(first)
			second, err := Compile(text)
			if err != nil {
				t.Fatalf("Compile(Format(x)): %v\n%s", err, text)
			}
			if diff := diffSchemas(first, second); diff != "" {
				t.Fatalf("round trip changed the schema: %s\nformatted:\n%s", diff, text)
			}
			if again := Format(second); again != text {
				t.Fatalf("Format is not stable:\n%s\nthen\n%s", text, again)
			}
		})
	}
}

// diffSchemas compares two schemas ignoring source positions; it returns "" when
// they are equal.
// diffSchemas compares a and b by name (Format sorts definitions and caveats, and
// caveat parameters, by name), docs and caveat expressions as Format prints them.
func diffSchemas(a, b *ir.Schema) string {
	if fmt.Sprint(a.UseFlags) != fmt.Sprint(b.UseFlags) {
		return fmt.Sprintf("use flags %v vs %v", a.UseFlags, b.UseFlags)
	}
	if len(a.Definitions) != len(b.Definitions) || len(a.Caveats) != len(b.Caveats) {
		return "different numbers of definitions or caveats"
	}
	doc := func(d string) string { // Format normalizes comments as SpiceDB does
		var b strings.Builder
		writeDoc(&b, d, "")
		return b.String()
	}
	params := func(c *ir.Caveat) string {
		return fmt.Sprint(slices.SortedFunc(slices.Values(c.Params), func(x, y caveat.Param) int { return strings.Compare(x.Name, y.Name) }))
	}
	for _, c := range a.Caveats {
		d := b.Caveat(c.Name)
		if d == nil || doc(c.Doc) != doc(d.Doc) || CaveatExpression(c) != CaveatExpression(d) || params(c) != params(d) {
			return fmt.Sprintf("caveat %q differs: %+v vs %+v", c.Name, c, d)
		}
	}
	for _, d := range a.Definitions {
		e := b.Definition(d.Name)
		if e == nil || doc(d.Doc) != doc(e.Doc) || len(d.Relations) != len(e.Relations) {
			return fmt.Sprintf("definition %q differs", d.Name)
		}
		for j, r := range d.Relations {
			s := e.Relations[j]
			if r.Name != s.Name || doc(r.Doc) != doc(s.Doc) || fmt.Sprint(r.Allowed) != fmt.Sprint(s.Allowed) || exprString(r.Rewrite) != exprString(s.Rewrite) {
				return fmt.Sprintf("%s#%s differs: %s vs %s", d.Name, r.Name, exprString(r.Rewrite), exprString(s.Rewrite))
			}
		}
	}
	return ""
}

// exprString renders an expression tree exactly, without positions.
func exprString(e *ir.Expr) string {
	if e == nil {
		return "<nil>"
	}
	switch e.Kind {
	case ir.Ref:
		return e.Name
	case ir.Nil:
		return "nil"
	case ir.Arrow:
		return fmt.Sprintf("%s->%s/%d", e.Tupleset, e.Target, e.ArrowKind)
	}
	parts := make([]string, len(e.Children))
	for i, c := range e.Children {
		parts[i] = exprString(c)
	}
	return fmt.Sprintf("%d(%s)", e.Kind, strings.Join(parts, " "))
}

func TestCompileReportsAllDiagnostics(t *testing.T) {
	_, err := Compile("definition user {}\ndefinition doc {\n relation viewer: team\n permission view = viewr + nope->x\n}")
	var de *DiagnosticsError
	if !errors.As(err, &de) {
		t.Fatalf("error %v is not a *DiagnosticsError", err)
	}
	want := "3:19: definition `team` not found (used by relation `viewer` under definition `doc`)\n" +
		"4:20: relation/permission `viewr` not found under definition `doc` (used by permission `view`)\n" +
		"4:28: relation `nope` not found under definition `doc` (left side of an arrow in permission `view`)"
	if err.Error() != want {
		t.Errorf("error =\n%s\nwant\n%s", err, want)
	}
}

func TestCompileSyntaxErrorsOnly(t *testing.T) {
	_, err := Compile("definition doc {\n relation viewer: team\n permission view = +\n}")
	var de *DiagnosticsError
	if !errors.As(err, &de) || len(de.Diagnostics) != 1 || de.Diagnostics[0].Pos.Line != 3 {
		t.Fatalf("want exactly the syntax error on line 3, got %v", err)
	}
}

func TestCompileEmpty(t *testing.T) {
	s, err := Compile("  // nothing\n")
	if err != nil || len(s.Definitions) != 0 {
		t.Fatalf("Compile(empty) = %v, %v", s, err)
	}
	if got := Format(s); got != "" {
		t.Errorf("Format(empty) = %q", got)
	}
}
