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

// binary compiles e's left-nested chain in one loop (see ast.Spine), appending each
// operand to the node of the operator below it when the two operators flatten, so a
// flat union of n terms costs O(n) time and constant stack.
func (c *checker) binary(d *ast.Definition, out *ir.Definition, perm *ast.Relation, e *ast.Binary) *ir.Expr {
	leaf, chain := ast.Spine(e)
	at := ir.Pos(leaf.Position())
	acc := c.expr(d, out, perm, leaf)
	for _, b := range chain {
		if c.stop.Stopped() {
			break
		}
		k := opKinds[b.Op]
		if k == ir.Exclusion || acc.Kind != k {
			acc = &ir.Expr{Kind: k, Pos: at, Children: []*ir.Expr{acc}}
		}
		acc.Pos = at
		acc.Children = appendOperand(acc.Children, k, c.expr(d, out, perm, b.Right))
	}
	return acc
}

// checkNesting refuses a rewrite whose operators nest deeper than ast.MaxNesting. A
// chain of `+` (or `&`) merges into one operator of any length, but exclusions and
// alternating operators nest one level per operator, and what is printed of such a
// tree (ReadSchema, the .zed a Permify schema is kept as) has a parenthesis per
// level, which the parsers refuse past the limit.
func (c *checker) checkNesting(perm *ast.Relation, x *ir.Expr) {
	if deep := deeperThan(x, ast.MaxNesting); deep != nil {
		c.errorf(ast.Pos(deep.Pos), "permission `%s` nests operators more than %d deep: exclusions and alternating operators nest one level each; "+
			"write `a - (b + c + d)` rather than `a - b - c - d`", perm.Name, ast.MaxNesting)
	}
}

// deeperThan returns the first node of x more than limit operators deep, or nil. It
// stops descending at the limit, so its recursion is bounded and its cost linear.
func deeperThan(x *ir.Expr, limit int) *ir.Expr {
	if len(x.Children) == 0 {
		return nil
	}
	if limit == 0 {
		return x
	}
	for _, c := range x.Children {
		if deep := deeperThan(c, limit-1); deep != nil {
			return deep
		}
	}
	return nil
}

// appendOperand adds child to the children of an operator of kind k, splicing in a
// child of the same flattening kind (a parenthesized `(a + b)` inside a union).
func appendOperand(children []*ir.Expr, k ir.ExprKind, child *ir.Expr) []*ir.Expr {
	if k != ir.Exclusion && child.Kind == k {
		return append(children, child.Children...)
	}
	return append(children, child)
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
