package fga

import (
	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/schema/ir"
)

// schema builds the IR of a validated model, with OpenFGA's strategies st: per type, in the model's order, a
// permission per relation (name order) and, for each relation assignable directly,
// the stored relation of its tuples.
func (c *compiler) schema(st strategies, caveats []*ir.Caveat) *ir.Schema {
	defs := make([]*ir.Definition, 0, len(c.m.GetTypeDefinitions()))
	for _, td := range c.m.GetTypeDefinitions() {
		d := &ir.Definition{Name: td.GetType()}
		for _, r := range sortedKeys(td.GetRelations()) {
			arrows := func(ttu *openfgav1.TupleToUserset) []string {
				if ttu.GetComputedUserset().GetRelation() == r && c.onlyParent(td.GetType(), ttu.GetTupleset().GetRelation()) {
					return st.recursiveArrow(td.GetType(), r)
				}
				return st.arrow(td.GetType(), r, ttu)
			}
			var reached []string
			if st.reached != nil {
				reached = append([]string{}, st.reached[td.GetType()+"#"+r]...)
			}
			d.Relations = append(d.Relations, &ir.Relation{Name: r, Rewrite: rewrite(r, td.GetRelations()[r], arrows), ReachedFrom: reached})
		}
		for _, r := range sortedKeys(td.GetRelations()) {
			direct := c.direct[td.GetType()][r]
			if len(direct) == 0 {
				continue
			}
			allowed := make([]ir.AllowedSubject, 0, len(direct))
			for _, ref := range direct {
				fromSubject := st.userset(td.GetType(), r, ref)
				if ref.GetType() == td.GetType() && ref.GetRelation() == r {
					fromSubject = st.recursive(td.GetType(), r)
				}
				allowed = append(allowed, ir.AllowedSubject{SubjectType: ir.SubjectType{
					Type: ref.GetType(), Relation: ref.GetRelation(), Wildcard: ref.GetWildcard() != nil, Caveat: ref.GetCondition(),
				}, FromSubject: fromSubject})
			}
			d.Relations = append(d.Relations, &ir.Relation{Name: StoredRelation(r), Allowed: allowed})
		}
		defs = append(defs, d)
	}
	return ir.NewSchema(defs, caveats, nil)
}

// rewrite converts relation r's userset rewrite: `this` reads r's stored relation,
// `x from y` walks y's stored relation to x on its objects (from the subject's side
// for the subject types arrows names).
func rewrite(r string, u *openfgav1.Userset, arrows func(*openfgav1.TupleToUserset) []string) *ir.Expr {
	switch x := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		return &ir.Expr{Kind: ir.Ref, Name: StoredRelation(r)}
	case *openfgav1.Userset_ComputedUserset:
		return &ir.Expr{Kind: ir.Ref, Name: x.ComputedUserset.GetRelation()}
	case *openfgav1.Userset_TupleToUserset:
		return &ir.Expr{
			Kind: ir.Arrow, Tupleset: StoredRelation(x.TupleToUserset.GetTupleset().GetRelation()),
			Target: x.TupleToUserset.GetComputedUserset().GetRelation(), FromSubject: arrows(x.TupleToUserset),
		}
	case *openfgav1.Userset_Union:
		return operands(ir.Union, r, x.Union.GetChild(), arrows)
	case *openfgav1.Userset_Intersection:
		return operands(ir.Intersection, r, x.Intersection.GetChild(), arrows)
	case *openfgav1.Userset_Difference:
		return &ir.Expr{Kind: ir.Exclusion, Children: []*ir.Expr{rewrite(r, x.Difference.GetBase(), arrows), rewrite(r, x.Difference.GetSubtract(), arrows)}}
	}
	return &ir.Expr{Kind: ir.Nil}
}

// operands builds a union or intersection; one operand is the operand itself.
func operands(kind ir.ExprKind, r string, children []*openfgav1.Userset, arrows func(*openfgav1.TupleToUserset) []string) *ir.Expr {
	if len(children) == 1 {
		return rewrite(r, children[0], arrows)
	}
	x := &ir.Expr{Kind: kind}
	for _, ch := range children {
		x.Children = append(x.Children, rewrite(r, ch, arrows))
	}
	return x
}

// onlyParent reports whether typ#tupleset admits typ alone, plainly: an arrow over it
// to typ's own relation is recursive.
func (c *compiler) onlyParent(typ, tupleset string) bool {
	refs := c.direct[typ][tupleset]
	return len(refs) == 1 && refs[0].GetType() == typ && refs[0].GetRelation() == "" && refs[0].GetWildcard() == nil && refs[0].GetCondition() == ""
}
