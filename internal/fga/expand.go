package fga

import (
	"context"
	"slices"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Expand answers OpenFGA's Expand on r (from m.Reader): relation's rewrite on object
// one level deep, every node named `object#relation`. Directly assigned users are a
// leaf of users (sorted, each once); a computed relation a leaf naming
// `object#other`; `x from y` a leaf naming `object#y` and, for each object y lists,
// `that#x`; operators a node with a child per operand.
func Expand(ctx context.Context, m *Model, r store.Reader, object rel.ObjectRef, relation string) (*openfgav1.UsersetTree, error) {
	if err := m.validateTarget(object.Type, relation); err != nil {
		return nil, err
	}
	x := expansion{r: r, object: object, name: objectRelation(object, relation)}
	root, err := x.node(ctx, relation, m.types()[object.Type].GetRelations()[relation])
	if err != nil {
		return nil, err
	}
	return &openfgav1.UsersetTree{Root: root}, nil
}

// types indexes the model's type definitions by name.
func (m *Model) types() map[string]*openfgav1.TypeDefinition {
	out := make(map[string]*openfgav1.TypeDefinition, len(m.Proto.GetTypeDefinitions()))
	for _, td := range m.Proto.GetTypeDefinitions() {
		out[td.GetType()] = td
	}
	return out
}

type expansion struct {
	r      store.Reader
	object rel.ObjectRef
	name   string
}

func objectRelation(o rel.ObjectRef, relation string) string {
	return o.Type + ":" + o.ID + "#" + relation
}

func (x *expansion) node(ctx context.Context, relation string, u *openfgav1.Userset) (*openfgav1.UsersetTree_Node, error) {
	n := &openfgav1.UsersetTree_Node{Name: x.name}
	switch us := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		users, err := x.read(ctx, relation, func(s rel.SubjectRef) string { return UserString(s) })
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Leaf{Leaf: &openfgav1.UsersetTree_Leaf{
			Value: &openfgav1.UsersetTree_Leaf_Users{Users: &openfgav1.UsersetTree_Users{Users: users}},
		}}
	case *openfgav1.Userset_ComputedUserset:
		n.Value = &openfgav1.UsersetTree_Node_Leaf{Leaf: &openfgav1.UsersetTree_Leaf{
			Value: &openfgav1.UsersetTree_Leaf_Computed{Computed: &openfgav1.UsersetTree_Computed{
				Userset: objectRelation(x.object, us.ComputedUserset.GetRelation()),
			}},
		}}
	case *openfgav1.Userset_TupleToUserset:
		target := us.TupleToUserset.GetComputedUserset().GetRelation()
		tupleset := us.TupleToUserset.GetTupleset().GetRelation()
		sets, err := x.read(ctx, tupleset, func(s rel.SubjectRef) string { return objectRelation(s.Object, target) })
		if err != nil {
			return nil, err
		}
		computed := make([]*openfgav1.UsersetTree_Computed, 0, len(sets))
		for _, s := range sets {
			computed = append(computed, &openfgav1.UsersetTree_Computed{Userset: s})
		}
		n.Value = &openfgav1.UsersetTree_Node_Leaf{Leaf: &openfgav1.UsersetTree_Leaf{
			Value: &openfgav1.UsersetTree_Leaf_TupleToUserset{TupleToUserset: &openfgav1.UsersetTree_TupleToUserset{
				Tupleset: objectRelation(x.object, tupleset), Computed: computed,
			}},
		}}
	case *openfgav1.Userset_Union:
		nodes, err := x.nodes(ctx, relation, us.Union.GetChild())
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Union{Union: &openfgav1.UsersetTree_Nodes{Nodes: nodes}}
	case *openfgav1.Userset_Intersection:
		nodes, err := x.nodes(ctx, relation, us.Intersection.GetChild())
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Intersection{Intersection: &openfgav1.UsersetTree_Nodes{Nodes: nodes}}
	case *openfgav1.Userset_Difference:
		nodes, err := x.nodes(ctx, relation, []*openfgav1.Userset{us.Difference.GetBase(), us.Difference.GetSubtract()})
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Difference{Difference: &openfgav1.UsersetTree_Difference{Base: nodes[0], Subtract: nodes[1]}}
	}
	return n, nil
}

func (x *expansion) nodes(ctx context.Context, relation string, children []*openfgav1.Userset) ([]*openfgav1.UsersetTree_Node, error) {
	out := make([]*openfgav1.UsersetTree_Node, 0, len(children))
	for _, c := range children {
		n, err := x.node(ctx, relation, c)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// read returns, sorted and each once, the users of the object's tuples of relation,
// spelled by spell.
func (x *expansion) read(ctx context.Context, relation string, spell func(rel.SubjectRef) string) ([]string, error) {
	f := store.Filter{ResourceType: x.object.Type, ResourceIDs: []string{x.object.ID}, Relation: StoredRelation(relation)}
	out := []string{}
	for item, err := range x.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		out = append(out, spell(item.Relationship.Subject))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
