package server

import (
	"context"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/relv1"
)

// ExpandPermissionTree returns the permission's expansion as SpiceDB shapes it: every
// permission and arrow is an intermediate node named for the permission on its object,
// relations are leaves of the subjects written on them, and subject sets in leaves are
// not expanded further.
func (p *permissionsService) ExpandPermissionTree(ctx context.Context, req *v1.ExpandPermissionTreeRequest) (*v1.ExpandPermissionTreeResponse, error) {
	r, sch, err := p.s.readerAndSchema(ctx, req.GetConsistency())
	if err != nil {
		return nil, p.s.status(err)
	}
	root, err := p.s.engine.Expand(ctx, sch, r, relv1.FromObject(req.GetResource()), req.GetPermission(), engine.ExpandPermissionNodes())
	if err != nil {
		return nil, p.s.status(err)
	}
	return &v1.ExpandPermissionTreeResponse{ExpandedAt: tokenFor(r.Revision()), TreeRoot: expandTreeToV1(root)}, nil
}

var expandOps = map[engine.ExpandOp]v1.AlgebraicSubjectSet_Operation{
	engine.ExpandUnion:        v1.AlgebraicSubjectSet_OPERATION_UNION,
	engine.ExpandIntersection: v1.AlgebraicSubjectSet_OPERATION_INTERSECTION,
	engine.ExpandExclusion:    v1.AlgebraicSubjectSet_OPERATION_EXCLUSION,
}

func expandTreeToV1(n *engine.ExpandNode) *v1.PermissionRelationshipTree {
	out := &v1.PermissionRelationshipTree{ExpandedObject: relv1.Object(n.Object), ExpandedRelation: n.Relation}
	if n.Op == engine.ExpandLeaf {
		leaf := &v1.DirectSubjectSet{}
		for _, s := range n.Subjects {
			leaf.Subjects = append(leaf.Subjects, relv1.Subject(s))
		}
		out.TreeType = &v1.PermissionRelationshipTree_Leaf{Leaf: leaf}
		return out
	}
	set := &v1.AlgebraicSubjectSet{Operation: expandOps[n.Op]}
	for _, c := range n.Children {
		set.Children = append(set.Children, expandTreeToV1(c))
	}
	out.TreeType = &v1.PermissionRelationshipTree_Intermediate{Intermediate: set}
	return out
}
