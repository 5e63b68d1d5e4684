package check

import (
	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// expr compiles a permission expression of definition d, reporting unknown names and
// arrows SpiceDB refuses. Unions and intersections are flattened: `a + b + c` is one
// Union with three children.
func (c *checker) expr(d *ast.Definition, out *ir.Definition, perm *ast.Relation, e ast.Expr) *ir.Expr {
	switch e := e.(type) {
	case *ast.Paren:
		return c.expr(d, out, perm, e.X)
	case *ast.Nil:
		return &ir.Expr{Kind: ir.Nil, Pos: ir.Pos(e.Pos)}
	case *ast.Ident:
		if out.Relation(e.Name) == nil {
			c.typeErrorf(e.Pos, map[string]string{"definition_name": d.Name, "relation_or_permission_name": e.Name}, "relation/permission `%s` not found under definition `%s` (used by permission `%s`)", e.Name, d.Name, perm.Name)
		}
		return &ir.Expr{Kind: ir.Ref, Pos: ir.Pos(e.Pos), Name: e.Name}
	case *ast.Arrow:
		c.checkArrow(d, out, perm, e)
		k := ir.ArrowAny
		if e.Func == ast.ArrowAll {
			k = ir.ArrowAll
		}
		return &ir.Expr{Kind: ir.Arrow, Pos: ir.Pos(e.Tupleset.Pos), Tupleset: e.Tupleset.Name, Target: e.Target.Name, ArrowKind: k, AnySpelled: e.Func == ast.ArrowAny}
	case *ast.Binary:
		return c.binary(d, out, perm, e)
	}
	return &ir.Expr{Kind: ir.Nil}
}

var opKinds = map[ast.BinaryOp]ir.ExprKind{ast.Union: ir.Union, ast.Intersection: ir.Intersection, ast.Exclusion: ir.Exclusion}

func (c *checker) binary(d *ast.Definition, out *ir.Definition, perm *ast.Relation, e *ast.Binary) *ir.Expr {
	k := opKinds[e.Op]
	n := &ir.Expr{Kind: k, Pos: ir.Pos(e.Position())}
	for _, side := range []ast.Expr{e.Left, e.Right} {
		child := c.expr(d, out, perm, side)
		if k != ir.Exclusion && child.Kind == k {
			n.Children = append(n.Children, child.Children...)
			continue
		}
		n.Children = append(n.Children, child)
	}
	return n
}

// checkArrow applies SpiceDB's rules to `tupleset->target`: the tupleset is a
// relation (not a permission) of this definition and admits no wildcard. The target
// is looked up on each subject at check time; a target that no subject type has is
// only a warning (see Lint).
func (c *checker) checkArrow(d *ast.Definition, out *ir.Definition, perm *ast.Relation, a *ast.Arrow) {
	ts := out.Relation(a.Tupleset.Name)
	switch {
	case ts == nil:
		c.typeErrorf(a.Tupleset.Pos, map[string]string{"definition_name": d.Name, "relation_or_permission_name": a.Tupleset.Name}, "relation `%s` not found under definition `%s` (left side of an arrow in permission `%s`)", a.Tupleset.Name, d.Name, perm.Name)
	case ts.IsPermission():
		c.typeErrorf(a.Tupleset.Pos, map[string]string{"definition_name": d.Name, "permission_name": perm.Name, "used_permission_name": a.Tupleset.Name}, "under permission `%s`: permissions cannot be used on the left hand side of an arrow (found `%s`); use a relation", perm.Name, a.Tupleset.Name)
	default:
		if w := c.wildcardVia(d.Name, ts.Name, map[string]bool{}); w != nil {
			c.typeErrorf(a.Tupleset.Pos, map[string]string{"definition_name": d.Name, "permission_name": perm.Name, "accessed_relation_name": ts.Name}, "for arrow under permission `%s`: relation `%s#%s` includes wildcard type `%s` via relation `%s`: wildcard relations cannot be used on the left side of arrows", perm.Name, d.Name, ts.Name, w.Type, w.Via)
		}
	}
}
