package check

import (
	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Lint returns warnings about a schema that compiled: things SpiceDB accepts but its
// tooling warns about. Today: an arrow whose target exists on none of the subject
// types of its left-hand relation, which can never grant anything.
func Lint(f *ast.File, s *ir.Schema) []Diagnostic {
	var out []Diagnostic
	for _, d := range f.Definitions {
		def := s.Definition(d.Name)
		if def == nil {
			continue
		}
		for _, r := range d.Relations {
			if r.IsPermission {
				out = lintExpr(s, def, r, r.Expr, out)
			}
		}
	}
	Sort(out)
	return out
}

func lintExpr(s *ir.Schema, def *ir.Definition, perm *ast.Relation, e ast.Expr, out []Diagnostic) []Diagnostic {
	ast.Leaves(e, func(x ast.Expr) {
		a, ok := x.(*ast.Arrow)
		if ok && !arrowTargetReachable(s, def, a.Tupleset.Name, a.Target.Name) {
			out = append(out, Diagnostic{Pos: a.Target.Pos, Msg: "arrow `" + a.Tupleset.Name + "->" + a.Target.Name +
				"` under permission `" + perm.Name + "` references relation/permission `" + a.Target.Name +
				"` that does not exist on any subject type of relation `" + a.Tupleset.Name + "`"})
		}
	})
	return out
}

func arrowTargetReachable(s *ir.Schema, def *ir.Definition, tupleset, target string) bool {
	ts := def.Relation(tupleset)
	if ts == nil {
		return true
	}
	for _, a := range ts.Allowed {
		if d := s.Definition(a.Type); d != nil && d.Relation(target) != nil {
			return true
		}
	}
	return false
}
