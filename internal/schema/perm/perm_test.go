package perm

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// tree prints an expression fully parenthesised, so a test states the grouping.
func tree(x *ir.Expr) string {
	switch x.Kind {
	case ir.Ref:
		return x.Name
	case ir.Arrow:
		return x.Tupleset + "." + x.Target
	case ir.Nil:
		return "nil"
	}
	op := map[ir.ExprKind]string{ir.Union: " or ", ir.Intersection: " and ", ir.Exclusion: " not "}[x.Kind]
	parts := make([]string, len(x.Children))
	for i, c := range x.Children {
		parts[i] = tree(c)
	}
	return "(" + strings.Join(parts, op) + ")"
}

func mustCompile(t *testing.T, src string) *ir.Schema {
	t.Helper()
	s, err := Compile(src)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, src)
	}
	return s
}

func TestPrecedenceIsFlatAndLeftToRight(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"aaa or bbb and ccc", "((aaa or bbb) and ccc)"},
		{"aaa and bbb or ccc", "((aaa and bbb) or ccc)"},
		{"self or xxx not blocked", "((self or xxx) not blocked)"},
		{"aaa not bbb or ccc", "((aaa not bbb) or ccc)"},
		{"aaa not bbb not ccc", "((aaa not bbb) not ccc)"},
		{"aaa or bbb or ccc", "(aaa or bbb or ccc)"},
		{"aaa or (bbb and ccc)", "(aaa or (bbb and ccc))"},
		{"aaa and (bbb not ccc) or ddd", "((aaa and (bbb not ccc)) or ddd)"},
		{"self or (xxx or aaa) not blocked", "((self or xxx or aaa) not blocked)"},
		{"aaa and par.view or bbb", "((aaa and par.view) or bbb)"},
		{"aaa or bbb and ccc not ddd or self", "((((aaa or bbb) and ccc) not ddd) or self)"},
	}
	for _, c := range cases {
		src := "entity user {}\nentity doc {\n relation par @doc\n relation aaa @user\n relation bbb @user\n relation ccc @user\n relation ddd @user\n" +
			" relation self @user\n relation xxx @user\n relation blocked @user\n permission view = aaa\n permission ppp = " + c.expr + "\n}\n"
		s := mustCompile(t, src)
		got := tree(s.Definition("doc").Relation("ppp").Rewrite)
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.expr, got, c.want)
		}
	}
}

func TestWorkloadSchemaRoundTripsThroughZed(t *testing.T) {
	src, err := os.ReadFile("/work/shared/workloads/permify/schema.perm")
	if err != nil {
		t.Skip("reference workload not present:", err)
	}
	s := mustCompile(t, string(src))
	if got := tree(s.Definition("content").Relation("view").Rewrite); got != "((owner.self or is_public or owner.follower) not owner.blocked)" {
		t.Errorf("content.view = %s", got)
	}
	z, err := schema.Compile(schema.Format(s))
	if err != nil {
		t.Fatalf("the .zed rendering does not compile: %v", err)
	}
	in := Inspect(z)
	if in.Attributes["user"]["is_public"] != "boolean" || in.Attributes["content"]["is_public"] != "boolean" {
		t.Errorf("attributes not recovered from .zed: %+v", in.Attributes)
	}
	if in.IsAttribute("user", "self") {
		t.Error("relation self taken for an attribute")
	}
	// A boolean attribute matches any subject type through a wildcard with the value caveat.
	al := z.Definition("content").Relation("is_public").Allowed
	if len(al) != 3 || !al[0].Wildcard || al[0].Caveat != "latch_boolean" {
		t.Errorf("is_public allowed = %+v", al)
	}
}

func TestRulesAttributesAndFoldedText(t *testing.T) {
	src := `rule check_balance(balance double, limit integer) { balance >= context.data.amount && limit > 0 }
rule in_region(regions string[]) { context.data.region in regions }
entity user {} entity account { relation owner @user attribute balance double attribute limit integer
 attribute regions string[] attribute frozen boolean
 action withdraw = check_balance(balance, limit) and owner not frozen
 permission region_ok = in_region(regions) or check_balance(balance, limit) }`
	s := mustCompile(t, src)
	acct := s.Definition("account")
	if got := tree(acct.Relation("withdraw").Rewrite); got != "((rule_check_balance_1 and owner) not frozen)" {
		t.Errorf("withdraw = %s", got)
	}
	if got := tree(acct.Relation("region_ok").Rewrite); got != "(rule_in_region_1 or rule_check_balance_1)" {
		t.Errorf("region_ok = %s (identical calls share one relation)", got)
	}
	c := s.Caveat("check_balance")
	if c == nil || len(c.Params) != 3 || c.Params[2].Name != "context" {
		t.Fatalf("check_balance caveat = %+v", c)
	}
	in := Inspect(s)
	calls := in.Calls["account"]
	if len(calls) != 2 || calls[0].Rule != "check_balance" || strings.Join(calls[0].Args, ",") != "balance,limit" {
		t.Errorf("calls = %+v", calls)
	}
	if in.Attributes["account"]["regions"] != "string[]" || in.Rules["in_region"].Params[0].Type != "string[]" {
		t.Errorf("inspect = %+v", in)
	}
	if al := acct.Relation("balance").Allowed; len(al) != 1 || al[0].Type != "account" || al[0].Caveat != "latch_double" {
		t.Errorf("a non-boolean attribute should allow only its own entity's wildcard: %+v", al)
	}
	if _, err := schema.Compile(schema.Format(s)); err != nil {
		t.Errorf("the .zed rendering does not compile: %v", err)
	}
}

func TestErrorsArePositioned(t *testing.T) {
	base := "entity user {}\n"
	cases := []struct{ src, want string }{
		// lexer
		{base + "entity doc { relation owner @user $ }", "2:35: expected `relation`, `attribute`, `permission`, `action` or `}`, found illegal character \"$\""},
		{base + "/* open", "2:1: unterminated block comment"},
		// parser
		{base + "definition doc {}", "2:1: expected `entity` or `rule`, found `definition`"},
		{base + "entity {}", "2:8: expected an entity name, found `{`"},
		{base + "entity relation {}", "2:8: expected an entity name, found keyword `relation`"},
		{base + "entity doc { relation owner @user", "2:34: entity `doc` is not closed"},
		{base + "entity doc { member owner @user }", "2:14: expected `relation`, `attribute`, `permission`, `action` or `}`, found `member`"},
		{base + "entity doc { relation owner }", "2:29: relation `owner` needs at least one subject type"},
		{base + "entity doc { relation owner @ }", "2:31: expected an entity type after `@`, found `}`"},
		{base + "entity doc { relation owner @user# }", "2:36: expected a relation name after `#`, found `}`"},
		{base + "entity doc { attribute size number }", "2:29: expected the type of attribute `size`"},
		{base + "entity doc { attribute tags string[ }", "2:37: expected `]` to close the array type `string[]`"},
		{base + "entity doc { relation owner @user\n permission view owner }", "3:18: expected `=` after permission `view`, found `owner`"},
		{base + "entity doc { relation owner @user\n permission view = }", "3:20: expected a relation, permission, attribute or rule call, found `}`"},
		{base + "entity doc { relation owner @user\n permission view = (owner or owner }", "3:36: expected `)` to close the parenthesis opened at 3:20"},
		{base + "entity doc { relation owner @user\n permission view = owner owner }", "3:26: expected `or`, `and`, `not` or the end of permission `view`, found `owner`"},
		{base + "entity doc { relation owner @user\n permission view = owner. }", "3:27: expected a relation or permission after `.`, found `}`"},
		{base + "entity doc { relation owner @user\n permission view = owner or and }", "3:29: expected a relation, permission, attribute or rule call, found keyword `and`"},
		{"rule r { true }", "1:8: expected `(` after rule name `r`, found `{`"},
		{"rule r(a) { a }", "1:9: expected the type of parameter `a`"},
		{"rule r(a boolean b boolean) { a }", "1:18: expected `,` between the parameters of rule `r`, found `b`"},
		{"rule r(a boolean) a }", "1:19: expected `{` to open the body of rule `r`, found `a`"},
		{"rule r(a boolean) { a ", "1:19: the body of rule `r` is not closed"},
		{"rule r(a boolean) { a }\nentity doc { attribute a boolean\n permission p = r(a }", "3:21: expected `,` between the arguments of rule `r`, found `}`"},
		{"rule r(a boolean) { a }\nentity doc { attribute a boolean\n permission p = r(x.y) }", "3:20: rule arguments must be attributes of the entity; `x.` is not supported"},
		// lowering
		{"rule r(a boolean) { a }\nrule r(b boolean) { b }", "2:6: duplicate rule `r` (first defined at 1:6)"},
		{"rule latch_x(a boolean) { a }", "1:6: rule name `latch_x` is reserved"},
		{"rule r() { true }", "1:6: rule `r` has no parameters"},
		{"rule r(context boolean) { context }", "1:8: parameter name `context` is reserved in rule `r`"},
		{base + "entity doc { attribute size integer\n permission view = size }", "3:20: attribute `size` of entity `doc` is of type integer: only boolean attributes"},
		{base + "entity doc { attribute flag boolean\n permission view = flag.view }", "3:20: `flag` is an attribute of entity `doc`: only relations can be followed"},
		{"entity user { attribute age integer }\nentity doc { relation owner @user\n permission view = owner.age }", "3:26: attribute `age` of entity `user` is of type integer"},
		{base + "entity doc { attribute a boolean\n permission view = nope(a) }", "3:20: rule `nope` is not defined"},
		{"rule r(a boolean) { a }\nentity doc { attribute a boolean\n permission p = r() }", "3:17: rule `r` takes 1 argument(s) but is called with 0"},
		{"rule r(a boolean) { a }\nentity doc { relation owner @doc\n permission p = r(owner) }", "3:19: argument `owner` of rule `r` is not an attribute of entity `doc`"},
		{"rule r(a boolean) { a }\nentity doc { attribute n integer\n permission p = r(n) }", "3:19: argument `n` of rule `r` is of type integer but parameter `a` is of type boolean"},
		// shared checker, positions still in Permify source
		{base + "entity doc { relation owner @team }", "2:30: entity `team` not found (used by relation `owner` in entity `doc`)"},
		{base + "entity doc { relation owner @user\n permission view = editor }", "3:20: relation/permission `editor` not found in entity `doc`"},
		{base + "entity doc {}\nentity doc {}", "3:8: duplicate entity `doc`"},
		{base + "entity doc { relation owner @user\n relation owner @user }", "3:11: duplicate relation/permission name `owner`"},
		{base + "entity doc { relation ab @user }", "2:23: invalid relation name `ab` in entity `doc`"},
		{"rule r(a boolean) {\n  a +\n}", "2:3: invalid expression for rule `r`: ERROR: r:2:6: Syntax error"},
		{"rule r(a integer) { a }", "1:21: invalid expression for rule `r`: rule body must result in a boolean value: found `int`"},
		{base + "entity doc { relation owner @user\n permission view = owner\n permission edit = view.owner }", "4:20: under permission `edit`: permissions cannot be used on the left hand side of an arrow"},
	}
	for _, c := range cases {
		_, err := Compile(c.src)
		var de *schema.DiagnosticsError
		if !errors.As(err, &de) {
			t.Errorf("%q: want a DiagnosticsError containing %q, got %v", c.src, c.want, err)
			continue
		}
		if !strings.Contains(de.Error(), c.want) {
			t.Errorf("%q:\n got  %s\n want %s", c.src, de.Error(), c.want)
		}
	}
}

func TestSyntheticNamesDoNotCollide(t *testing.T) {
	src := `rule r(flag boolean) { flag }
entity doc { attribute flag boolean  relation rule_r_1 @doc
 permission ppp = r(flag) or rule_r_1 }`
	s := mustCompile(t, src)
	if got := tree(s.Definition("doc").Relation("ppp").Rewrite); got != "(rule_r_2 or rule_r_1)" {
		t.Errorf("ppp = %s", got)
	}
}

func FuzzCompile(f *testing.F) {
	f.Add("entity user {}\nentity doc { relation owner @user attribute pub boolean permission view = owner or pub }")
	f.Add("rule r(a double) { a > context.data.x }\nentity e { attribute a double permission p = r(a) }")
	f.Add("entity a { relation b @a#c permission d = (b.d or b) not b }")
	f.Fuzz(func(t *testing.T, src string) {
		_, _ = CompileWith(src, Options{PermifyNames: true}) // must not panic
		s, err := Compile(src)
		if err == nil {
			if _, err := schema.Compile(schema.Format(s)); err != nil {
				t.Fatalf("compiled schema does not round-trip through .zed: %v", err)
			}
		}
	})
}

func TestPermifyNames(t *testing.T) {
	src := "entity u {}\nentity Doc {\n relation o @u\n relation v @u @Doc#o\n attribute p boolean\n permission x = o or v or p\n action e = v.o\n}"
	if _, err := Compile(src); err == nil {
		t.Fatal("SpiceDB naming rules should refuse `u`")
	}
	s, err := CompileWith(src, Options{PermifyNames: true})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Definition("Doc")
	if d == nil || d.Relation("x") == nil || tree(d.Relation("x").Rewrite) != "(o or v or p)" || tree(d.Relation("e").Rewrite) != "v.o" {
		t.Fatalf("names not restored: %+v", s.Definitions)
	}
	if al := d.Relation("v").Allowed; al[0].Type != "u" || al[1].Type != "Doc" || al[1].Relation != "o" {
		t.Errorf("allowed = %+v", al)
	}
	if in := Inspect(s); in.Attributes["Doc"]["p"] != "boolean" {
		t.Errorf("inspect = %+v", in.Attributes)
	}
	for _, c := range []struct{ src, want string }{
		{"entity u { relation o @nope }", "1:24: entity `nope` not found"},
		{"entity u { relation o @u permission q = zz }", "1:41: relation/permission `zz` not found in entity `u`"},
		{"entity u { relation " + strings.Repeat("r", 65) + " @u }", "1:21: invalid relation name"},
		{"entity u {}\nentity u {}", "2:8: duplicate entity `u`"},
	} {
		_, err := CompileWith(c.src, Options{PermifyNames: true})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
}
