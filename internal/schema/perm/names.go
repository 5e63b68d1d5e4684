package perm

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// permifyName is what Permify's own tenants accept as an entity, relation, attribute
// or permission name: shorter and more permissive than SpiceDB's names.
var permifyName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)

// spicedbName matches names the shared checker accepts (definition and relation
// names have the same shape without a prefix).
var spicedbName = regexp.MustCompile(`^[a-z][a-z0-9_]{1,62}[a-z0-9]$`)

// renamer lets the shared checker, which enforces SpiceDB's naming rules, check a
// schema with Permify's names: names SpiceDB would refuse are swapped for stand-ins
// before checking and swapped back in the IR and in diagnostics afterwards.
type renamer struct {
	to, from map[string]string
	taken    map[string]bool
}

func newRenamer(f *ast.File) *renamer {
	r := &renamer{to: map[string]string{}, from: map[string]string{}, taken: map[string]bool{}}
	for _, d := range f.Definitions {
		r.taken[d.Name] = true
		for _, m := range d.Relations {
			r.taken[m.Name] = true
		}
	}
	return r
}

func (r *renamer) name(n string) string {
	if spicedbName.MatchString(n) {
		return n
	}
	if m, ok := r.to[n]; ok {
		return m
	}
	var m string
	for i := len(r.to); ; i++ {
		if m = fmt.Sprintf("latch_name_%d_x", i); !r.taken[m] {
			break
		}
	}
	r.taken[m] = true
	r.to[n], r.from[m] = m, n
	return m
}

func (r *renamer) back(n string) string {
	if o, ok := r.from[n]; ok {
		return o
	}
	return n
}

// checkNames reports names Permify itself refuses.
func (l *lowerer) checkNames() {
	bad := func(at ast.Pos, what, n string) {
		if !permifyName.MatchString(n) {
			l.errorf(at, "invalid %s name `%s`: use 1 to 64 letters, digits and underscores, not starting with a digit", what, n)
		}
	}
	for _, e := range l.f.entities {
		bad(e.namePos, "entity", e.name)
		for _, m := range e.members {
			bad(m.namePos, m.keyword, m.name)
		}
	}
}

// apply renames every name in f.
func (r *renamer) apply(f *ast.File) {
	for _, d := range f.Definitions {
		d.Name = r.name(d.Name)
		for _, m := range d.Relations {
			m.Name = r.name(m.Name)
			for _, t := range m.Types {
				t.Type = r.name(t.Type)
				if t.Relation != "" {
					t.Relation = r.name(t.Relation)
				}
			}
			if m.Expr != nil {
				r.expr(m.Expr)
			}
		}
	}
}

func (r *renamer) expr(x ast.Expr) {
	ast.Leaves(x, func(x ast.Expr) {
		switch x := x.(type) {
		case *ast.Ident:
			x.Name = r.name(x.Name)
		case *ast.Arrow:
			x.Tupleset.Name = r.name(x.Tupleset.Name)
			x.Target.Name = r.name(x.Target.Name)
		}
	})
}

// restore puts the original names back into s and returns it re-indexed.
func (r *renamer) restore(s *ir.Schema) *ir.Schema {
	if len(r.from) == 0 {
		return s
	}
	for _, d := range s.Definitions {
		d.Name = r.back(d.Name)
		for _, m := range d.Relations {
			m.Name = r.back(m.Name)
			for i := range m.Allowed {
				m.Allowed[i].Type = r.back(m.Allowed[i].Type)
				m.Allowed[i].Relation = r.back(m.Allowed[i].Relation)
			}
			if m.Rewrite != nil {
				r.restoreExpr(m.Rewrite)
			}
		}
	}
	return ir.NewSchema(s.Definitions, s.Caveats, s.UseFlags)
}

func (r *renamer) restoreExpr(x *ir.Expr) {
	x.Name, x.Tupleset, x.Target = r.back(x.Name), r.back(x.Tupleset), r.back(x.Target)
	for _, c := range x.Children {
		r.restoreExpr(c)
	}
}

// message puts original names back into a diagnostic.
func (r *renamer) message(msg string) string {
	for m, o := range r.from {
		msg = strings.ReplaceAll(msg, "`"+m+"`", "`"+o+"`")
	}
	return msg
}
