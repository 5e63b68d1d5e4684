package zed

import (
	"fmt"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/schema/ast"
)

// sexpr renders an expression fully parenthesized so tests state grouping exactly.
func sexpr(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Binary:
		return fmt.Sprintf("(%s %s %s)", sexpr(e.Left), e.Op, sexpr(e.Right))
	case *ast.Paren:
		return sexpr(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.Nil:
		return "nil"
	case *ast.Arrow:
		switch e.Func {
		case ast.ArrowAny:
			return e.Tupleset.Name + ".any(" + e.Target.Name + ")"
		case ast.ArrowAll:
			return e.Tupleset.Name + ".all(" + e.Target.Name + ")"
		}
		return e.Tupleset.Name + "->" + e.Target.Name
	}
	return "?"
}

func parseOK(t *testing.T, src string) *ast.File {
	t.Helper()
	f, diags := Parse(src)
	if len(diags) != 0 {
		t.Fatalf("Parse(%q): unexpected diagnostics %v", src, diags)
	}
	return f
}

func permExpr(t *testing.T, expr string) string {
	t.Helper()
	f := parseOK(t, "definition doc { permission p = "+expr+" }")
	return sexpr(f.Definitions[0].Relations[0].Expr)
}

func TestPrecedence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a", "a"},
		{"a + b", "(a + b)"},
		{"a + b + c", "((a + b) + c)"},
		{"a - b - c", "((a - b) - c)"},
		{"a & b & c", "((a & b) & c)"},
		{"a - b + c", "(a - (b + c))"},
		{"a + b - c", "((a + b) - c)"},
		{"a & b + c", "(a & (b + c))"},
		{"a + b & c", "((a + b) & c)"},
		{"a - b & c", "(a - (b & c))"},
		{"a & b - c", "((a & b) - c)"},
		{"a + b & c - d", "(((a + b) & c) - d)"},
		{"a - b & c + d", "(a - (b & (c + d)))"},
		{"a - b + c & d - e", "((a - ((b + c) & d)) - e)"},
		{"(a - b) + c", "((a - b) + c)"},
		{"a - (b - c)", "(a - (b - c))"},
		{"(a + b) & (c - d)", "((a + b) & (c - d))"},
		{"((a))", "a"},
		{"parent->view + viewer", "(parent->view + viewer)"},
		{"viewer - parent->banned & x", "(viewer - (parent->banned & x))"},
		{"group.any(member) & org.all(admin)", "(group.any(member) & org.all(admin))"},
		{"nil", "nil"},
		{"a + nil - (nil)", "((a + nil) - nil)"},
	}
	for _, tt := range tests {
		if got := permExpr(t, tt.in); got != tt.want {
			t.Errorf("%q parsed as %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestConstructs(t *testing.T) {
	src := `use expiration
use typechecking

/** a caveat */
caveat only_on(day string, allowed list<string>, m map<list<int>>) {
	day in allowed && {"a": "}"}["a"] == "}" // }
}

// the user
definition user {}

/* tenant docs
   second line */
definition tenant/document {
	/** who can view */
	relation viewer: user | tenant/group#member | user:* | user with only_on | user with expiration | user with only_on and expiration | tenant/group#...
	// computed
	permission view: user = viewer + parent->view + parent.any(view) - parent.all(banned)
}`
	f := parseOK(t, src)
	if got := []string{f.Uses[0].Flag, f.Uses[1].Flag}; got[0] != "expiration" || got[1] != "typechecking" {
		t.Errorf("uses = %v", got)
	}
	c := f.Caveats[0]
	if c.Name != "only_on" || c.Doc != "/** a caveat */" || len(c.Params) != 3 {
		t.Fatalf("caveat = %+v", c)
	}
	if c.Params[1].Type != "list<string>" || c.Params[2].Type != "map<list<int>>" {
		t.Errorf("param types = %q %q", c.Params[1].Type, c.Params[2].Type)
	}
	wantExpr := "day in allowed && {\"a\": \"}\"}[\"a\"] == \"}\" // }"
	if c.Expr != wantExpr {
		t.Errorf("caveat expr = %q, want %q", c.Expr, wantExpr)
	}
	if c.ExprPos != (ast.Pos{Line: 6, Col: 2}) {
		t.Errorf("caveat expr pos = %v", c.ExprPos)
	}
	if f.Definitions[0].Doc != "// the user" {
		t.Errorf("user doc = %q", f.Definitions[0].Doc)
	}
	doc := f.Definitions[1]
	if doc.Name != "tenant/document" || doc.Doc != "/* tenant docs\nsecond line */" {
		t.Errorf("definition = %q doc %q", doc.Name, doc.Doc)
	}
	viewer := doc.Relations[0]
	if viewer.Doc != "/** who can view */" || viewer.IsPermission {
		t.Errorf("viewer = %+v", viewer)
	}
	var refs []string
	for _, r := range viewer.Types {
		refs = append(refs, fmt.Sprintf("%s|%s|%v|%s|%v", r.Type, r.Relation, r.Wildcard, r.Caveat, r.Expiration))
	}
	want := []string{
		"user||false||false", "tenant/group|member|false||false", "user||true||false",
		"user||false|only_on|false", "user||false||true", "user||false|only_on|true", "tenant/group|...|false||false",
	}
	if strings.Join(refs, " ") != strings.Join(want, " ") {
		t.Errorf("types =\n%v\nwant\n%v", refs, want)
	}
	view := doc.Relations[1]
	if !view.IsPermission || view.Doc != "// computed" || len(view.Types) != 1 || view.Types[0].Type != "user" {
		t.Errorf("view = %+v", view)
	}
	if got := sexpr(view.Expr); got != "(((viewer + parent->view) + parent.any(view)) - parent.all(banned))" {
		t.Errorf("view expr = %s", got)
	}
}

func TestNoNewlinesNeeded(t *testing.T) {
	for _, src := range []string{
		"definition a {} definition b { relation r: a permission p = r }",
		"definition doc { relation x: a relation y: b }",
		"definition doc { relation x: a; relation y: b; permission p = x + y; }",
		"use expiration definition doc { relation x: user with expiration permission p = x }",
		"caveat c(a int) { a > 1 } definition doc { relation x: u with c }",
	} {
		f := parseOK(t, src)
		if len(f.Definitions) == 0 {
			t.Errorf("%q: no definitions", src)
		}
	}
	f := parseOK(t, "definition doc { relation x: a relation y: b }")
	if n := len(f.Definitions[0].Relations); n != 2 {
		t.Errorf("got %d relations, want 2", n)
	}
}

func TestPositions(t *testing.T) {
	f := parseOK(t, "definition user {}\n\ndefinition doc {\n  relation viewer: user\n  permission view = viewer + x->y\n}")
	d := f.Definitions[1]
	if d.Pos != (ast.Pos{Line: 3, Col: 1}) || d.NamePos != (ast.Pos{Line: 3, Col: 12}) {
		t.Errorf("definition at %v name at %v", d.Pos, d.NamePos)
	}
	r := d.Relations[0]
	if r.Pos != (ast.Pos{Line: 4, Col: 3}) || r.NamePos != (ast.Pos{Line: 4, Col: 12}) || r.Types[0].Pos != (ast.Pos{Line: 4, Col: 20}) {
		t.Errorf("relation at %v name %v type %v", r.Pos, r.NamePos, r.Types[0].Pos)
	}
	b := d.Relations[1].Expr.(*ast.Binary)
	if b.OpPos != (ast.Pos{Line: 5, Col: 28}) || b.Right.Position() != (ast.Pos{Line: 5, Col: 30}) {
		t.Errorf("op at %v right at %v", b.OpPos, b.Right.Position())
	}
}

func TestTrailingCommentIsNotDoc(t *testing.T) {
	f := parseOK(t, "definition user {} // about user\ndefinition doc {\n relation a: user // about a\n relation b: user\n}")
	if d := f.Definitions[1].Doc; d != "" {
		t.Errorf("doc took a trailing comment: %q", d)
	}
	if d := f.Definitions[1].Relations[1].Doc; d != "" {
		t.Errorf("relation doc took a trailing comment: %q", d)
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // "line:col: message fragment"
	}{
		{"garbage at top", "foo", []string{"1:1: expected `definition`, `caveat` or `use`, found `foo`"}},
		{"missing name", "definition {}", []string{"1:12: expected definition name, found `{`"}},
		{"keyword name", "definition nil {}", []string{"1:12: expected definition name, found keyword `nil`"}},
		{"missing brace", "definition doc relation", []string{"1:16: expected `{`, found `relation`"}},
		{"unclosed definition", "definition doc {\n relation r: user", []string{"2:18: expected `}` to close definition `doc`"}},
		{"unclosed before next", "definition doc {\ndefinition user {}", []string{"2:1: expected `}` to close definition `doc` before `definition`"}},
		{"missing colon", "definition doc { relation r user }", []string{"1:29: expected `:` after relation name, found `user`"}},
		{"empty types", "definition doc { relation r: }", []string{"1:30: expected subject type, found `}`"}},
		{"bad wildcard", "definition doc { relation r: user:foo }", []string{"1:35: expected `*` after `:` in a wildcard subject type, found `foo`"}},
		{"missing subject relation", "definition doc { relation r: group# }", []string{"1:37: expected subject relation after `#`, found `}`"}},
		{"with nothing", "definition doc { relation r: user with }", []string{"1:40: expected caveat name or `expiration` after `with`, found `}`"}},
		{"and without expiration", "definition doc { relation r: user with c and d }", []string{"1:46: expected `expiration` after `and`, found `d`"}},
		{"missing equals", "definition doc { permission p viewer }", []string{"1:31: expected `=` after permission name, found `viewer`"}},
		{"missing operand", "definition doc { permission p = a + }", []string{"1:37: expected a relation, permission, `nil` or `(`, found `}`"}},
		{"two operands", "definition doc { permission p = a b }", []string{"1:35: expected end of statement, found `b`"}},
		{"unclosed paren", "definition doc { permission p = (a + b }", []string{"1:40: expected `)` or an operator, found `}`"}},
		{"bad arrow target", "definition doc { permission p = a-> }", []string{"1:37: expected relation or permission name after `->`, found `}`"}},
		{"nested arrow", "definition doc { permission p = a->b->c }", []string{"1:37: nested arrows are not supported"}},
		{"bad arrow func", "definition doc { permission p = a.some(b) }", []string{"1:35: expected `any` or `all` after `.`, found `some`"}},
		{"unclosed any", "definition doc { permission p = a.any(b }", []string{"1:41: expected `)` to close `any(`, found `}`"}},
		{"stray token in body", "definition doc { foo }", []string{"1:18: expected `relation`, `permission` or `}`, found `foo`"}},
		{"unknown use", "use bogus\ndefinition doc {}", []string{"1:5: unknown use flag `bogus`; options are: expiration, typechecking"}},
		{"unsupported use", "use self", []string{"1:5: use flag `self`: `self` in permission expressions is not supported by latch"}},
		{"use after definition", "definition doc {}\nuse expiration", []string{"2:1: `use` expressions must be declared before any definition or caveat"}},
		{"use after caveat", "caveat c(a int) { a }\nuse expiration", []string{"2:1: `use` expressions must be declared before any definition or caveat"}},
		{"caveat without params", "caveat c() { true }", []string{"1:10: expected caveat parameter name, found `)`"}},
		{"caveat bad param type", "caveat c(a) { a }", []string{"1:11: expected caveat parameter type, found `)`"}},
		{"caveat unclosed type", "caveat c(a list<int) { a }", []string{"1:20: expected `>` to close the type arguments, found `)`"}},
		{"caveat unclosed body", "caveat c(a int) { a > {1: 2}", []string{"1:17: unterminated caveat expression: missing `}`"}},
		{"caveat empty body", "caveat c(a int) {  }", []string{"1:17: missing caveat expression for caveat `c`"}},
		{"bad character", "definition doc { relation r: user @ }", []string{"1:35: unrecognized character '@'"}},
		{"unterminated comment", "definition doc {} /* oops", []string{"1:19: unterminated multiline comment"}},
		{"partial", "partial p {}", []string{"1:1: partials are not supported by latch"}},
		{
			"too deep", "definition doc { permission p = " + strings.Repeat("(", 300) + "a" + strings.Repeat(")", 300) + " }",
			[]string{"1:233: expression nested too deeply"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := Parse(tt.src)
			if len(diags) != len(tt.want) {
				t.Fatalf("got %d diagnostics %v, want %v", len(diags), diags, tt.want)
			}
			for i, d := range diags {
				if !strings.HasPrefix(d.String(), tt.want[i]) {
					t.Errorf("diagnostic %d = %q, want prefix %q", i, d.String(), tt.want[i])
				}
			}
		})
	}
}

func TestReportsEveryError(t *testing.T) {
	src := `definition user {}
definition doc {
	relation a user
	relation b: user
	permission p = a +
	permission q = b
	relation c: group#
}
definition 9bad? {}
definition other {
	permission r = (a
}`
	f, diags := Parse(src)
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%d", d.Pos.Line, d.Pos.Col))
	}
	want := []string{"3:13", "6:2", "8:1", "9:16", "12:1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("error positions = %v, want %v\n%v", got, want, diags)
	}
	// Recovery keeps every member whose name parsed.
	var names []string
	for _, r := range f.Definitions[1].Relations {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "a,b,p,q,c" {
		t.Errorf("doc members after recovery = %v", names)
	}
}
