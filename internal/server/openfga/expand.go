package openfga

import (
	"context"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/fga"
)

// Expand returns OpenFGA's userset tree of a relation on an object: one level of its
// rewrite (fga.Expand), over the tuples the model admits and the request's
// contextual tuples.
func (s *Service) Expand(ctx context.Context, req *openfgav1.ExpandRequest) (*openfgav1.ExpandResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	snap, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), req.GetContextualTuples().GetTupleKeys())
	if err != nil {
		return nil, err
	}
	object := req.GetTupleKey().GetObject()
	obj, err := fga.ParseObject(object)
	if err != nil || obj.ID == "" {
		return nil, fgaError(openfgav1.ErrorCode_invalid_expand_input, "invalid object '%s': it must be 'type:id'", object)
	}
	tree, err := fga.Expand(ctx, snap.Model, snap.Reader, obj, req.GetTupleKey().GetRelation())
	if err != nil {
		return nil, fgaErr(err)
	}
	return &openfgav1.ExpandResponse{Tree: tree}, nil
}
