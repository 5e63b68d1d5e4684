package check_test

import (
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/check"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/zed"
)

func compile(t *testing.T, src string) (*ir.Schema, []check.Diagnostic) {
	t.Helper()
	f, diags := zed.Parse(src)
	if len(diags) > 0 {
		t.Fatalf("syntax errors: %v", diags)
	}
	return check.Check(f)
}

func TestDiagnostics(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // full "line:col: message" strings
	}{
		{
			"invalid definition name", "definition Doc {}",
			[]string{"1:12: invalid definition name `Doc`: each part must be 3 to 64 characters of lowercase letters, digits and underscores, start with a letter and not end with an underscore (a prefix is written `prefix/name`)"},
		},
		{
			"short definition name", "definition ab {}",
			[]string{"1:12: invalid definition name `ab`: each part must be 3 to 64 characters of lowercase letters, digits and underscores, start with a letter and not end with an underscore (a prefix is written `prefix/name`)"},
		},
		{
			"duplicate definition", "definition user {}\ndefinition user {}",
			[]string{"2:12: duplicate definition `user` (first defined at 1:12)"},
		},
		{
			"invalid relation name", "definition user {}\ndefinition doc { relation ab: user }",
			[]string{"2:27: invalid relation name `ab` in definition `doc`: must be 3 to 64 characters of lowercase letters, digits and underscores, start with a letter and not end with an underscore"},
		},
		{
			"duplicate relation and permission", "definition user {}\ndefinition doc {\n relation viewer: user\n permission viewer = viewer + viewer\n}",
			[]string{"4:13: duplicate relation/permission name `viewer` under definition `doc` (first defined at 3:11)"},
		},
		{
			"unknown subject type", "definition doc { relation viewer: team }",
			[]string{"1:35: definition `team` not found (used by relation `viewer` under definition `doc`)"},
		},
		{
			"unknown subject relation", "definition group {}\ndefinition doc { relation viewer: group#member }",
			[]string{"2:35: relation/permission `member` not found under definition `group` (used by relation `viewer` under definition `doc`)"},
		},
		{
			"duplicate subject type", "definition user {}\ndefinition doc { relation viewer: user | user }",
			[]string{"2:42: duplicate subject type `user` on relation `viewer` under definition `doc`"},
		},
		{
			"ellipsis duplicates plain type", "definition user {}\ndefinition doc { relation viewer: user | user#... }",
			[]string{"2:42: duplicate subject type `user` on relation `viewer` under definition `doc`"},
		},
		{
			"expiration without use", "definition user {}\ndefinition doc { relation viewer: user with expiration }",
			[]string{"2:45: `with expiration` on relation `viewer` requires `use expiration` at the top of the schema"},
		},
		{
			"caveat and expiration without use", "caveat cav(a int) { a > 1 }\ndefinition user {}\ndefinition doc { relation viewer: user with cav and expiration }",
			[]string{"3:53: `with expiration` on relation `viewer` requires `use expiration` at the top of the schema"},
		},
		{
			"unknown caveat", "definition user {}\ndefinition doc { relation viewer: user with nocav }",
			[]string{"2:45: caveat `nocav` not found (used by relation `viewer` under definition `doc`)"},
		},
		{
			"unknown name in expression", "definition user {}\ndefinition doc {\n relation viewer: user\n permission view = viewer + editor\n}",
			[]string{"4:29: relation/permission `editor` not found under definition `doc` (used by permission `view`)"},
		},
		{
			"unknown arrow tupleset", "definition doc { permission view = parent->view }",
			[]string{"1:36: relation `parent` not found under definition `doc` (left side of an arrow in permission `view`)"},
		},
		{
			"permission on arrow left", "definition user {}\ndefinition doc {\n relation owner: user\n permission own = owner\n permission view = own->view\n}",
			[]string{"5:20: under permission `view`: permissions cannot be used on the left hand side of an arrow (found `own`); use a relation"},
		},
		{
			"arrow over wildcard", "definition user { relation view: user }\ndefinition doc {\n relation parent: user | user:*\n permission view = parent->view\n}",
			[]string{"4:20: for arrow under permission `view`: relation `doc#parent` includes wildcard type `user` via relation `doc#parent`: wildcard relations cannot be used on the left side of arrows"},
		},
		{
			"arrow over transitive wildcard", "definition user {}\ndefinition group {\n relation member: user:*\n permission view = member\n}\ndefinition doc {\n relation parent: group#member\n permission view = parent.any(view)\n}",
			[]string{
				"7:19: relation `parent` under definition `doc` allows `group#member`, which includes wildcard type `user:*` via relation `group#member`: wildcard relations cannot be transitively included",
				"8:20: for arrow under permission `view`: relation `doc#parent` includes wildcard type `user` via relation `group#member`: wildcard relations cannot be used on the left side of arrows",
			},
		},
		{
			"transitive wildcard through two hops", "definition user {}\ndefinition team {\n relation lead: user:*\n}\ndefinition group {\n relation member: team#lead | user\n}\ndefinition doc {\n relation viewer: user | group#member\n}",
			[]string{
				"6:19: relation `member` under definition `group` allows `team#lead`, which includes wildcard type `user:*` via relation `team#lead`: wildcard relations cannot be transitively included",
				"9:26: relation `viewer` under definition `doc` allows `group#member`, which includes wildcard type `user:*` via relation `team#lead`: wildcard relations cannot be transitively included",
			},
		},
		{
			"transitive wildcard asked about before a relation of the same name", "definition user {}\ndefinition defc {\n relation www: user\n}\ndefinition defa {\n relation rrr: defb#www\n}\ndefinition defb {\n relation www: user:*\n}\ndefinition defx {\n relation qqq: defc#www\n}",
			[]string{"6:16: relation `rrr` under definition `defa` allows `defb#www`, which includes wildcard type `user:*` via relation `defb#www`: wildcard relations cannot be transitively included"},
		},
		{"invalid caveat name", "caveat bad.name(a int) { a }", nil}, // the parser stops at `.`; see TestCaveatNames
		{
			"duplicate caveat", "caveat cav(a int) { a > 1 }\ncaveat cav(b int) { b > 1 }",
			[]string{"2:8: duplicate caveat `cav` (first defined at 1:8)"},
		},
		{
			"duplicate parameter", "caveat cav(a int, a string) { a > 1 }",
			[]string{"1:19: duplicate parameter `a` in caveat `cav`"},
		},
		{
			"unused parameter", "caveat cav(a int, b int, c map<int>) { a > 1 && c.b == 2 }",
			[]string{"1:19: parameter `b` for caveat `cav` is unused"},
		},
		{
			"annotation checked under typechecking", "use typechecking\ndefinition user {}\ndefinition doc {\n relation viewer: user\n permission view: team = viewer\n}",
			[]string{"5:19: definition `team` not found (used by permission `view` under definition `doc`)"},
		},
		{
			"alias to itself", "definition doc { permission view = view }",
			[]string{"1:18: under definition `doc`, there exists a cycle in permissions: view"},
		},
		{
			"alias loop", "definition user {}\ndefinition doc {\n relation viewer: user\n permission ccc = aaa\n permission aaa = (bbb)\n permission bbb = ccc\n permission ddd = aaa\n permission eee = viewer\n}",
			[]string{"4:2: under definition `doc`, there exists a cycle in permissions: aaa, bbb, ccc, ddd"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, perr := zed.Parse(tt.src)
			if tt.want == nil {
				if len(perr) == 0 {
					t.Fatal("expected a syntax error")
				}
				return
			}
			if len(perr) > 0 {
				t.Fatalf("syntax errors: %v", perr)
			}
			s, diags := check.Check(f)
			var got []string
			for _, d := range diags {
				got = append(got, d.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if s != nil {
				t.Error("schema returned along with diagnostics")
			}
		})
	}
}

func TestAccepted(t *testing.T) {
	tests := []struct{ name, src string }{
		{"recursion through arrow", "definition folder {\n relation parent: folder\n relation viewer: user\n permission view = viewer + parent->view\n}\ndefinition user {}"},
		{"self reference in union", "definition user {}\ndefinition doc {\n relation viewer: user\n permission view = view + viewer\n}"},
		{"alias chain", "definition user {}\ndefinition doc {\n relation viewer: user\n permission aaa = bbb\n permission bbb = viewer\n}"},
		{"permission over wildcard relations", "definition user {}\ndefinition doc {\n relation viewer: user | user:*\n relation banned: user | user:*\n permission view = viewer - banned & viewer\n}"},
		{"subject relation to permission over wildcard", "definition user {}\ndefinition group {\n relation direct: user:*\n permission member = direct\n}\ndefinition doc {\n relation viewer: group#member\n}"},
		{"own subject relation with wildcard", "definition user {}\ndefinition group {\n relation member: user:* | group#member\n}"},
		{"expiration with use", "use expiration\ndefinition user {}\ndefinition doc { relation viewer: user with expiration | user:* with expiration }"},
		{"caveat named expiration without use", "caveat expiration(a int) { a > 1 }\ndefinition user {}\ndefinition doc { relation viewer: user with expiration }"},
		{"same type with and without caveat", "caveat cav(a int) { a > 1 }\ndefinition user {}\ndefinition doc { relation viewer: user | user with cav }"},
		{"annotation ignored without typechecking", "definition user {}\ndefinition doc {\n relation viewer: user\n permission view: team = viewer\n}"},
		{"arrow target missing is only a warning", "definition user {}\ndefinition doc {\n relation owner: user\n permission view = owner->nothing\n}"},
		// SpiceDB 1.56 remembers whether a relation reaches a wildcard by its name alone:
		// an earlier definition's `www` without one hides defb's (probed on SpiceDB, which
		// accepts both and refuses them with the definitions in the other order).
		{"wildcard hidden by an arrow's relation of the same name", "definition user {}\ndefinition defc {\n relation www: user\n}\ndefinition defz {\n relation www: defc\n permission ppp = www->www\n}\ndefinition defa {\n relation rrr: defb#www\n}\ndefinition defb {\n relation www: user:*\n}"},
		{"wildcard hidden by a subject relation of the same name", "definition user {}\ndefinition defc {\n relation www: user\n}\ndefinition defx {\n relation qqq: defc#www\n}\ndefinition defa {\n relation rrr: defb#www\n}\ndefinition defb {\n relation www: user:*\n}"},
		{"nil", "definition doc { permission view = nil }"},
		{"prefixed", "definition tenant/user {}\ndefinition tenant/doc { relation viewer: tenant/user }"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, diags := compile(t, tt.src)
			if len(diags) > 0 || s == nil {
				t.Fatalf("diagnostics: %v", diags)
			}
		})
	}
}

func TestExpiringCaveatNamedExpiration(t *testing.T) {
	s, diags := compile(t, "caveat expiration(a int) { a > 1 }\ndefinition user {}\ndefinition doc { relation viewer: user with expiration }")
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	got := s.Definition("doc").Relation("viewer").Allowed[0]
	if got.Caveat != "expiration" || got.Expiration {
		t.Errorf("allowed = %+v, want the caveat `expiration`", got)
	}
}

func TestIR(t *testing.T) {
	s, diags := compile(t, `use expiration
caveat cav(a int) { a > 1 }
/** users */
definition user {}
definition doc {
	relation viewer: user | user:* with cav | group#member with cav and expiration
	relation parent: doc
	permission view = viewer + parent->view + viewer - parent.all(view) & (nil + viewer)
}
definition group { relation member: user }`)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if s.Definition("user").Doc != "/** users */" || !s.Uses("expiration") {
		t.Error("doc or use flag lost")
	}
	doc := s.Definition("doc")
	want := []ir.SubjectType{
		{Type: "user"},
		{Type: "user", Wildcard: true, Caveat: "cav"},
		{Type: "group", Relation: "member", Caveat: "cav", Expiration: true},
	}
	got := doc.Relation("viewer").Allowed
	if len(got) != 3 {
		t.Fatalf("allowed = %+v", got)
	}
	for i := range want {
		if got[i].SubjectType != want[i] {
			t.Errorf("allowed[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	view := doc.Relation("view").Rewrite
	// view = (viewer + parent->view + viewer) - (parent.all(view) & (nil + viewer))
	if view.Kind != ir.Exclusion || len(view.Children) != 2 {
		t.Fatalf("top = %+v", view)
	}
	union := view.Children[0]
	if union.Kind != ir.Union || len(union.Children) != 3 || union.Children[1].Kind != ir.Arrow || union.Children[1].ArrowKind != ir.ArrowAny {
		t.Errorf("left = %+v (want a flattened 3-way union)", union)
	}
	inter := view.Children[1]
	if inter.Kind != ir.Intersection || inter.Children[0].ArrowKind != ir.ArrowAll || inter.Children[1].Kind != ir.Union || inter.Children[1].Children[0].Kind != ir.Nil {
		t.Errorf("right = %+v", inter)
	}
	if view.Pos != (ir.Pos{Line: 8, Col: 20}) {
		t.Errorf("expression position = %v", view.Pos)
	}
}

func TestDuplicateSubjectTypeReported(t *testing.T) {
	_, diags := compile(t, "definition user {}\ndefinition doc { relation viewer: user | user#... }")
	if len(diags) != 1 || !strings.Contains(diags[0].Msg, "duplicate subject type `user`") {
		t.Errorf("diagnostics = %v", diags)
	}
}

func TestRelationWithoutTypes(t *testing.T) {
	// The .zed parser cannot produce this; another language's parser can.
	f := &ast.File{Definitions: []*ast.Definition{{
		Name: "doc", NamePos: ast.Pos{Line: 1, Col: 12},
		Relations: []*ast.Relation{{Name: "viewer", NamePos: ast.Pos{Line: 2, Col: 11}}},
	}}}
	_, diags := check.Check(f)
	if len(diags) != 1 || diags[0].String() != "2:11: relation `viewer` under definition `doc` must allow at least one subject type" {
		t.Errorf("diagnostics = %v", diags)
	}
}

func TestDiagnosticsSortedAndComplete(t *testing.T) {
	_, diags := compile(t, `definition doc {
	permission view = missing_a + parent->x
	relation parent: nothere
}
definition Bad {}
definition doc {}`)
	var got []string
	for _, d := range diags {
		got = append(got, d.String()[:strings.Index(d.String(), ": ")])
	}
	want := []string{"2:20", "3:19", "5:12", "6:12"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("positions %v, want %v\n%v", got, want, diags)
	}
}

func TestLint(t *testing.T) {
	f, _ := zed.Parse("definition user {}\ndefinition doc {\n relation owner: user\n permission view = owner->nothing + owner->owner_ok\n}")
	s, diags := check.Check(f)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	w := check.Lint(f, s)
	if len(w) != 2 || w[0].Pos != (ast.Pos{Line: 4, Col: 27}) || !strings.Contains(w[0].Msg, "does not exist on any subject type of relation `owner`") {
		t.Errorf("warnings = %v", w)
	}
}

func TestCaveatDiagnostics(t *testing.T) {
	tests := []struct {
		name, src, at, prefix string
	}{
		{"unknown parameter type", "caveat cav(a foo) { a }", "1:12", "invalid type for caveat parameter `a` on caveat `cav`: unknown type `foo`"},
		{"bad expression", "caveat cav(a int) { a > @@ }", "1:21", "invalid expression for caveat `cav`: ERROR: cav:1:25: "},
		{"bad expression on a later line", "caveat cav(a int) {\n  a > 1 &&\n  a < @@\n}", "2:3", "invalid expression for caveat `cav`: ERROR: cav:3:7: "},
		{"too expensive", "caveat cav(a list<int>, b list<int>) {\n  a.all(x, b.exists(y, x == y))\n}", "2:3", "invalid expression for caveat `cav`: caveat expression is too expensive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := compile(t, tt.src)
			if len(diags) == 0 {
				t.Fatal("accepted")
			}
			d := diags[0].String()
			if !strings.HasPrefix(d, tt.at+": "+tt.prefix) {
				t.Errorf("first diagnostic %q, want it at %s starting %q", d, tt.at, tt.prefix)
			}
		})
	}
}
