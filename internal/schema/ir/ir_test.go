package ir_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
)

func TestNewSchemaResolves(t *testing.T) {
	s, err := schema.Compile(`definition user {}
definition group {
	relation member: user | group#member
	permission view = member
}
definition doc {
	relation owner: user | group#member
	relation parent: doc | group
	permission view = owner + parent->view - parent.all(member)
}`)
	if err != nil {
		t.Fatal(err)
	}
	user, group, doc := s.Definitions[0], s.Definitions[1], s.Definitions[2]
	if doc.ID != 2 || group.Relations[1].ID != 1 || doc.Relations[0].ID != 2 || len(s.Relations) != 5 || s.Relations[4] != doc.Relation("view") {
		t.Fatalf("relation ids are not dense in declaration order: %v", relationIDs(s))
	}
	// view = (owner + parent->view) - parent.all(member), numbered depth first.
	view := doc.Relation("view").Rewrite
	owner, arrow, all := view.Children[0].Children[0], view.Children[0].Children[1], view.Children[1]
	if len(s.Exprs) != 6 || view.ID != 1 || owner.ID != 3 || all.ID != 5 || s.Exprs[4] != arrow {
		t.Fatalf("expression ids are not dense depth first: %d nodes, view %d, owner %d, all %d", len(s.Exprs), view.ID, owner.ID, all.ID)
	}
	if owner.Rel != doc.Relation("owner") || arrow.TuplesetRel != doc.Relation("parent") {
		t.Error("reference or tupleset not resolved")
	}
	if arrow.TargetOn(doc) != doc.Relation("view") || arrow.TargetOn(group) != group.Relation("view") || arrow.TargetOn(user) != nil {
		t.Error("arrow target not resolved per subject definition")
	}
	if all.TargetOn(group) != group.Relation("member") || all.TargetOn(doc) != nil {
		t.Error("arrows with different targets must not share a table")
	}
	a := doc.Relation("owner").Allowed[1]
	if a.Def != group || a.Rel != group.Relation("member") || doc.Relation("owner").Allowed[0].Rel != nil {
		t.Errorf("allowed subject %s not resolved", a)
	}
	if !doc.Relation("owner").AllowsType(ir.SubjectType{Type: "group", Relation: "member"}) || doc.Relation("owner").AllowsType(ir.SubjectType{Type: "group"}) {
		t.Error("AllowsType does not compare the entry by name")
	}
}

// A renamed member must be found again when the schema is rebuilt, as the Permify
// compiler does when it puts back the names it swapped for checking.
func TestNewSchemaRebuildFollowsNames(t *testing.T) {
	s, err := schema.Compile("definition user {}\ndefinition group {\n relation member: user | group#member\n permission view = member + member->view\n}")
	if err != nil {
		t.Fatal(err)
	}
	group := s.Definition("group")
	member := group.Relation("member")
	member.Name = "members"
	member.Allowed[1].Relation = "members"
	view := group.Relation("view").Rewrite
	view.Children[0].Name, view.Children[1].Tupleset = "members", "members"
	group.Relations[0], group.Relations[1] = group.Relations[1], group.Relations[0]
	s = ir.NewSchema(s.Definitions, s.Caveats, s.UseFlags)
	if member.ID != 1 || s.Relations[1] != member || group.Relation("members") != member || group.Relation("member") != nil {
		t.Fatal("rebuild did not re-index the renamed member")
	}
	if member.Allowed[1].Rel != member || view.Children[0].Rel != member || view.Children[1].TuplesetRel != member ||
		view.Children[1].TargetOn(group) != group.Relation("view") {
		t.Error("rebuild did not resolve references to the renamed member")
	}
}

func TestNewSchemaPanicsOnUnknownNames(t *testing.T) {
	rel := func(name string, a ...ir.SubjectType) *ir.Relation {
		r := &ir.Relation{Name: name}
		for _, st := range a {
			r.Allowed = append(r.Allowed, ir.AllowedSubject{SubjectType: st})
		}
		return r
	}
	perm := func(x *ir.Expr) *ir.Relation { return &ir.Relation{Name: "view", Rewrite: x} }
	for _, c := range []struct {
		member *ir.Relation
		want   string
	}{
		{rel("owner", ir.SubjectType{Type: "team"}), `allows unknown type "team"`},
		{rel("owner", ir.SubjectType{Type: "user", Relation: "member"}), "allows unknown subject relation user#member"},
		{perm(&ir.Expr{Kind: ir.Ref, Name: "editor"}), `refers to unknown relation "editor"`},
		{perm(&ir.Expr{Kind: ir.Arrow, Tupleset: "parent", Target: "view"}), `walks unknown relation "parent"`},
	} {
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			ir.NewSchema([]*ir.Definition{{Name: "user"}, {Name: "doc", Relations: []*ir.Relation{c.member}}}, nil, nil)
			return ""
		}()
		if !strings.Contains(got, c.want) {
			t.Errorf("panic %q, want one containing %q", got, c.want)
		}
	}
}

func relationIDs(s *ir.Schema) []string {
	var out []string
	for _, r := range s.Relations {
		out = append(out, fmt.Sprintf("%s#%s=%d", r.Def.Name, r.Name, r.ID))
	}
	return out
}
