package openfga

import (
	"context"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/fga"
	"github.com/latch-authz/latch/internal/store"
)

// Expand returns OpenFGA's userset tree of a relation on an object: one level of its
// rewrite, as OpenFGA expands it. The relation's own tuples are listed as users
// ("user:anne", "group:eng#member", "user:*"); a computed relation and the usersets
// of `x from y` are named, not expanded (a client expands them with further calls).
func (s *Service) Expand(ctx context.Context, req *openfgav1.ExpandRequest) (*openfgav1.ExpandResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	snap, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), req.GetContextualTuples().GetTupleKeys())
	if err != nil {
		return nil, err
	}
	object, relation := req.GetTupleKey().GetObject(), req.GetTupleKey().GetRelation()
	obj, err := fga.ParseObject(object)
	if err != nil || obj.ID == "" {
		return nil, fgaError(openfgav1.ErrorCode_invalid_expand_input, "invalid object '%s': it must be 'type:id'", object)
	}
	rewrite := relationRewrite(snap.Model.Proto, obj.Type, relation)
	if rewrite == nil {
		if !snap.Model.HasType(obj.Type) {
			return nil, fgaError(openfgav1.ErrorCode_type_not_found, "type '%s' not found", obj.Type)
		}
		return nil, fgaError(openfgav1.ErrorCode_relation_not_found, "relation '%s#%s' not found", obj.Type, relation)
	}
	x := &expander{snap: snap, object: object, typ: obj.Type, id: obj.ID}
	root, err := x.node(ctx, object+"#"+relation, relation, rewrite)
	if err != nil {
		return nil, err
	}
	return &openfgav1.ExpandResponse{Tree: &openfgav1.UsersetTree{Root: root}}, nil
}

// relationRewrite is the rewrite of relation on typ in m (nil when there is none).
func relationRewrite(m *openfgav1.AuthorizationModel, typ, relation string) *openfgav1.Userset {
	for _, td := range m.GetTypeDefinitions() {
		if td.GetType() == typ {
			return td.GetRelations()[relation]
		}
	}
	return nil
}

type expander struct {
	snap            *Snapshot
	object, typ, id string
}

func (x *expander) node(ctx context.Context, name, relation string, us *openfgav1.Userset) (*openfgav1.UsersetTree_Node, error) {
	n := &openfgav1.UsersetTree_Node{Name: name}
	switch u := us.GetUserset().(type) {
	case *openfgav1.Userset_This:
		users, err := x.users(ctx, relation)
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Leaf{Leaf: &openfgav1.UsersetTree_Leaf{Value: &openfgav1.UsersetTree_Leaf_Users{Users: &openfgav1.UsersetTree_Users{Users: users}}}}
	case *openfgav1.Userset_ComputedUserset:
		computed := &openfgav1.UsersetTree_Computed{Userset: x.object + "#" + u.ComputedUserset.GetRelation()}
		n.Value = &openfgav1.UsersetTree_Node_Leaf{Leaf: &openfgav1.UsersetTree_Leaf{Value: &openfgav1.UsersetTree_Leaf_Computed{Computed: computed}}}
	case *openfgav1.Userset_TupleToUserset:
		tupleset := u.TupleToUserset.GetTupleset().GetRelation()
		parents, err := x.users(ctx, tupleset)
		if err != nil {
			return nil, err
		}
		ttu := &openfgav1.UsersetTree_TupleToUserset{Tupleset: x.object + "#" + tupleset, Computed: []*openfgav1.UsersetTree_Computed{}}
		for _, p := range parents {
			ttu.Computed = append(ttu.Computed, &openfgav1.UsersetTree_Computed{Userset: p + "#" + u.TupleToUserset.GetComputedUserset().GetRelation()})
		}
		n.Value = &openfgav1.UsersetTree_Node_Leaf{Leaf: &openfgav1.UsersetTree_Leaf{Value: &openfgav1.UsersetTree_Leaf_TupleToUserset{TupleToUserset: ttu}}}
	case *openfgav1.Userset_Union:
		nodes, err := x.nodes(ctx, name, relation, u.Union.GetChild())
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Union{Union: nodes}
	case *openfgav1.Userset_Intersection:
		nodes, err := x.nodes(ctx, name, relation, u.Intersection.GetChild())
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Intersection{Intersection: nodes}
	case *openfgav1.Userset_Difference:
		base, err := x.node(ctx, name, relation, u.Difference.GetBase())
		if err != nil {
			return nil, err
		}
		sub, err := x.node(ctx, name, relation, u.Difference.GetSubtract())
		if err != nil {
			return nil, err
		}
		n.Value = &openfgav1.UsersetTree_Node_Difference{Difference: &openfgav1.UsersetTree_Difference{Base: base, Subtract: sub}}
	default:
		return nil, fgaError(openfgav1.InternalErrorCode_internal_error, "the model's rewrite of '%s' has an unknown form", name)
	}
	return n, nil
}

func (x *expander) nodes(ctx context.Context, name, relation string, children []*openfgav1.Userset) (*openfgav1.UsersetTree_Nodes, error) {
	out := &openfgav1.UsersetTree_Nodes{}
	for _, c := range children {
		n, err := x.node(ctx, name, relation, c)
		if err != nil {
			return nil, err
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}

// users lists the users of the tuples stored on the object's relation (those the
// model admits, and the request's contextual tuples).
func (x *expander) users(ctx context.Context, relation string) ([]string, error) {
	users := []string{}
	f := store.Filter{ResourceType: x.typ, ResourceIDs: []string{x.id}, Relation: fga.StoredRelation(relation)}
	for item, err := range x.snap.Reader.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, storeError(err)
		}
		users = append(users, fga.TupleKey(item.Relationship).GetUser())
	}
	return users, nil
}
