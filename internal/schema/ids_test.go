package schema_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/perm"
)

// TestResolvedIDs compiles every shared schema, in both languages, and holds the IR's
// ids and resolved references against what name lookups give.
func TestResolvedIDs(t *testing.T) {
	var total resolved
	for name, src := range schema.SharedSchemas(t) {
		t.Run(name, func(t *testing.T) {
			s, err := schema.Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			total.add(checkResolved(t, s))
		})
	}
	permify := map[string]perm.Options{"workload": {}, "workload/permify-names": {PermifyNames: true}}
	src, err := os.ReadFile(filepath.Join(schema.SharedDir, "workloads/permify/schema.perm"))
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range permify {
		t.Run(name, func(t *testing.T) {
			s, err := perm.CompileWith(string(src), opts)
			if err != nil {
				t.Fatal(err)
			}
			total.add(checkResolved(t, s))
		})
	}
	// Names SpiceDB refuses are renamed for checking and restored afterwards, which
	// builds the IR once more: the references must follow the restored names.
	t.Run("short-names", func(t *testing.T) {
		s, err := perm.CompileWith("entity u {}\nentity Doc {\n relation o @u\n relation v @u @Doc#o\n relation par @Doc\n"+
			" attribute p boolean\n permission x = o or v or p\n action e = v.o or par.e not par.x\n}", perm.Options{PermifyNames: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.Definition("Doc").Relation("e") == nil {
			t.Fatal("names were not restored")
		}
		total.add(checkResolved(t, s))
	})
	if total.refs == 0 || total.arrows == 0 || total.targets == 0 || total.subjectSets == 0 {
		t.Fatalf("the schemas exercise too little: %+v", total)
	}
}

// resolved counts what checkResolved looked at.
type resolved struct{ refs, arrows, targets, allowed, subjectSets int }

func (r *resolved) add(o resolved) {
	r.refs, r.arrows, r.targets = r.refs+o.refs, r.arrows+o.arrows, r.targets+o.targets
	r.allowed, r.subjectSets = r.allowed+o.allowed, r.subjectSets+o.subjectSets
}

// checkResolved fails t unless definition, relation and rewrite node ids are dense
// and unique, and every reference points where a lookup of its name does.
func checkResolved(t *testing.T, s *ir.Schema) resolved {
	t.Helper()
	var n resolved
	var rels []*ir.Relation
	var exprs []*ir.Expr
	for i, d := range s.Definitions {
		if d.ID != int32(i) || s.Definition(d.Name) != d {
			t.Errorf("definition %s: id %d at index %d", d.Name, d.ID, i)
		}
		for _, r := range d.Relations {
			if r.Def != d || d.Relation(r.Name) != r {
				t.Errorf("%s#%s is not indexed under its definition", d.Name, r.Name)
			}
			rels = append(rels, r)
			n.add(checkAllowed(t, s, r))
			if r.Rewrite != nil {
				exprs = appendTree(exprs, r.Rewrite)
			}
		}
	}
	if !slices.Equal(s.Relations, rels) {
		t.Errorf("Schema.Relations holds %d relations, not the %d members in declaration order", len(s.Relations), len(rels))
	}
	for i, r := range s.Relations {
		if r.ID != int32(i) {
			t.Errorf("%s#%s: id %d at index %d", r.Def.Name, r.Name, r.ID, i)
		}
	}
	if !slices.Equal(s.Exprs, exprs) {
		t.Errorf("Schema.Exprs holds %d nodes, not the %d rewrite nodes depth first", len(s.Exprs), len(exprs))
	}
	seen := map[*ir.Expr]bool{}
	for i, x := range s.Exprs {
		if x.ID != int32(i) || seen[x] {
			t.Errorf("rewrite node at index %d has id %d or appears twice", i, x.ID)
		}
		seen[x] = true
	}
	for _, r := range s.Relations {
		if r.Rewrite != nil {
			n.add(checkExprRefs(t, s, r, r.Rewrite))
		}
	}
	return n
}

func appendTree(out []*ir.Expr, x *ir.Expr) []*ir.Expr {
	out = append(out, x)
	for _, c := range x.Children {
		out = appendTree(out, c)
	}
	return out
}

func checkAllowed(t *testing.T, s *ir.Schema, r *ir.Relation) resolved {
	t.Helper()
	var n resolved
	for _, a := range r.Allowed {
		n.allowed++
		if a.Def == nil || a.Def != s.Definition(a.Type) {
			t.Errorf("%s#%s allows %s: resolved to the wrong definition", r.Def.Name, r.Name, a)
			continue
		}
		var want *ir.Relation
		if a.Relation != "" {
			n.subjectSets++
			want = a.Def.Relation(a.Relation)
		}
		if a.Rel != want || a.Relation != "" && want == nil {
			t.Errorf("%s#%s allows %s: resolved to the wrong subject relation", r.Def.Name, r.Name, a)
		}
	}
	return n
}

func checkExprRefs(t *testing.T, s *ir.Schema, perm *ir.Relation, x *ir.Expr) resolved {
	t.Helper()
	var n resolved
	d := perm.Def
	switch x.Kind {
	case ir.Ref:
		n.refs++
		if x.Rel == nil || x.Rel != d.Relation(x.Name) {
			t.Errorf("%s#%s: reference %q resolved to the wrong relation", d.Name, perm.Name, x.Name)
		}
	case ir.Arrow:
		n.arrows++
		if x.TuplesetRel == nil || x.TuplesetRel != d.Relation(x.Tupleset) {
			t.Errorf("%s#%s: arrow tupleset %q resolved to the wrong relation", d.Name, perm.Name, x.Tupleset)
		}
		if x.TargetOn(nil) != nil {
			t.Errorf("%s#%s: arrow %s->%s has a target on no definition", d.Name, perm.Name, x.Tupleset, x.Target)
		}
		for _, sub := range s.Definitions {
			got := x.TargetOn(sub)
			if got != sub.Relation(x.Target) {
				t.Errorf("%s#%s: arrow %s->%s on %s resolved to the wrong relation", d.Name, perm.Name, x.Tupleset, x.Target, sub.Name)
			}
			if got != nil {
				n.targets++
			}
		}
	}
	for _, c := range x.Children {
		n.add(checkExprRefs(t, s, perm, c))
	}
	return n
}
