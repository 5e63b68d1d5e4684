package engine

import (
	"context"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// ExpandOp is the kind of an expansion tree node.
type ExpandOp int

const (
	// ExpandLeaf lists the subjects a relation names directly.
	ExpandLeaf ExpandOp = iota
	ExpandUnion
	ExpandIntersection
	ExpandExclusion
)

// ExpandNode is one node of a permission's expansion: the operator of a rewrite with
// one child per operand, or, for a relation, the subjects written on it. Subject sets
// in leaves are not expanded further (SpiceDB's shallow expansion); permissions and
// arrows are.
type ExpandNode struct {
	Object   rel.ObjectRef
	Relation string
	Op       ExpandOp
	Children []*ExpandNode
	Subjects []rel.SubjectRef // ExpandLeaf only
}

// ExpandOption adjusts the shape of an expansion tree.
type ExpandOption func(*expander)

// ExpandPermissionNodes gives every permission its own operator node, named for the
// permission, even when its rewrite is a single operand (`permission view = viewer`
// becomes a union of one child), and an empty leaf for an arrow whose target the
// object's type lacks. That is SpiceDB's shape, whose schema compiler always wraps a
// rewrite in a set operation; without the option a single operand stands in for the
// permission, as Permify returns it.
func ExpandPermissionNodes() ExpandOption {
	return func(x *expander) { x.permissionNodes = true }
}

// Expand returns the expansion tree of relation on obj.
func (e *Engine) Expand(ctx context.Context, s *ir.Schema, r store.Reader, obj rel.ObjectRef, relation string, opts ...ExpandOption) (*ExpandNode, error) {
	def := s.Definition(obj.Type)
	if def == nil {
		return nil, &ir.UnknownDefinitionError{Name: obj.Type}
	}
	rl := def.Relation(relation)
	if rl == nil {
		return nil, &ir.UnknownRelationError{Definition: def.Name, Name: relation}
	}
	x := &expander{s: s, r: r}
	for _, o := range opts {
		o(x)
	}
	return x.relation(ctx, rl, obj.ID, e.maxDepth)
}

type expander struct {
	s               *ir.Schema
	r               store.Reader
	permissionNodes bool // see ExpandPermissionNodes
}

func (x *expander) relation(ctx context.Context, rl *ir.Relation, id string, depth int) (*ExpandNode, error) {
	if depth <= 0 {
		return nil, ErrMaxDepth
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	obj := rel.ObjectRef{Type: rl.Def.Name, ID: id}
	if rl.IsPermission() {
		n, err := x.expr(ctx, obj, rl, rl.Rewrite, depth)
		if err != nil || !x.permissionNodes || isSetOp(rl.Rewrite.Kind) {
			return n, err
		}
		return &ExpandNode{Object: obj, Relation: rl.Name, Op: ExpandUnion, Children: []*ExpandNode{n}}, nil
	}
	leaf := &ExpandNode{Object: obj, Relation: rl.Name, Op: ExpandLeaf}
	f := store.Filter{ResourceType: obj.Type, ResourceIDs: []string{id}, Relation: rl.Name}
	for item, err := range x.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		leaf.Subjects = append(leaf.Subjects, item.Relationship.Subject)
	}
	return leaf, nil
}

func (x *expander) expr(ctx context.Context, obj rel.ObjectRef, rl *ir.Relation, e *ir.Expr, depth int) (*ExpandNode, error) {
	switch e.Kind {
	case ir.Ref:
		return x.relation(ctx, e.Rel, obj.ID, depth-1)
	case ir.Nil:
		return &ExpandNode{Object: obj, Relation: rl.Name, Op: ExpandLeaf}, nil
	case ir.Arrow:
		return x.arrow(ctx, obj, rl, e, depth)
	}
	node := &ExpandNode{Object: obj, Relation: rl.Name, Op: map[ir.ExprKind]ExpandOp{
		ir.Union: ExpandUnion, ir.Intersection: ExpandIntersection, ir.Exclusion: ExpandExclusion,
	}[e.Kind]}
	for _, c := range e.Children {
		child, err := x.expr(ctx, obj, rl, c, depth)
		if err != nil {
			return nil, err
		}
		node.Children = append(node.Children, child)
	}
	return node, nil
}

// arrow expands the target on every object the tupleset names: a union for `->` and
// `.any()`, an intersection for `.all()`.
func (x *expander) arrow(ctx context.Context, obj rel.ObjectRef, rl *ir.Relation, e *ir.Expr, depth int) (*ExpandNode, error) {
	node := &ExpandNode{Object: obj, Relation: rl.Name, Op: ExpandUnion}
	if e.ArrowKind == ir.ArrowAll {
		node.Op = ExpandIntersection
	}
	f := store.Filter{ResourceType: obj.Type, ResourceIDs: []string{obj.ID}, Relation: e.Tupleset}
	var subjects []rel.ObjectRef
	for item, err := range x.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		subjects = append(subjects, item.Relationship.Subject.Object)
	}
	for _, s := range subjects {
		target := e.TargetOn(x.s.Definition(s.Type))
		if target == nil {
			if x.permissionNodes {
				node.Children = append(node.Children, &ExpandNode{Object: obj, Relation: rl.Name, Op: ExpandLeaf})
			}
			continue
		}
		child, err := x.relation(ctx, target, s.ID, depth-1)
		if err != nil {
			return nil, err
		}
		node.Children = append(node.Children, child)
	}
	return node, nil
}

func isSetOp(k ir.ExprKind) bool {
	return k == ir.Union || k == ir.Intersection || k == ir.Exclusion
}
