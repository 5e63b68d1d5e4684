package server

import (
	"context"
	"errors"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
)

// permissionsService serves authzed.api.v1.PermissionsService over the engine and store.
type permissionsService struct {
	v1.UnimplementedPermissionsServiceServer
	s *Server
}

func (p *permissionsService) CheckPermission(ctx context.Context, req *v1.CheckPermissionRequest) (*v1.CheckPermissionResponse, error) {
	r, sch, err := p.s.readerAndSchema(ctx, req.GetConsistency())
	if err != nil {
		return nil, p.s.status(err)
	}
	creq := checkRequestFromV1(req.GetResource(), req.GetPermission(), req.GetSubject(), req.GetContext())
	res, err := p.s.engine.Check(ctx, sch, r, creq)
	if err != nil {
		return nil, p.s.status(err)
	}
	if tr, ok := r.(*timedReader); ok {
		p.s.metrics.checkQueries.Observe(float64(tr.queries.Load()))
	}
	return &v1.CheckPermissionResponse{
		CheckedAt:         tokenFor(r.Revision()),
		Permissionship:    permissionshipToV1(res.Membership),
		PartialCaveatInfo: partialCaveatInfo(res),
	}, nil
}

// CheckBulkPermissions answers every item at one revision; an item that fails gets
// its own error status and does not fail the others.
func (p *permissionsService) CheckBulkPermissions(ctx context.Context, req *v1.CheckBulkPermissionsRequest) (*v1.CheckBulkPermissionsResponse, error) {
	items := req.GetItems()
	if len(items) > p.s.cfg.MaxChecksPerBulk {
		return nil, p.s.status(&tooManyError{tooManyChecks, len(items), p.s.cfg.MaxChecksPerBulk})
	}
	r, sch, err := p.s.readerAndSchema(ctx, req.GetConsistency())
	if err != nil {
		return nil, p.s.status(err)
	}
	creqs := make([]engine.CheckRequest, len(items))
	for i, it := range items {
		creqs[i] = checkRequestFromV1(it.GetResource(), it.GetPermission(), it.GetSubject(), it.GetContext())
	}
	results := p.s.engine.CheckBulk(ctx, sch, r, creqs)
	if len(results) != len(items) {
		return nil, p.s.status(internalError{errBulkLength})
	}
	if err := ctx.Err(); err != nil {
		return nil, p.s.status(err)
	}
	resp := &v1.CheckBulkPermissionsResponse{CheckedAt: tokenFor(r.Revision()), Pairs: make([]*v1.CheckBulkPermissionsPair, len(items))}
	for i, it := range items {
		resp.Pairs[i] = p.s.bulkPair(it, results[i])
	}
	return resp, nil
}

func (s *Server) bulkPair(it *v1.CheckBulkPermissionsRequestItem, br engine.BulkResult) *v1.CheckBulkPermissionsPair {
	pair := &v1.CheckBulkPermissionsPair{Request: it}
	if br.Err != nil {
		st, _ := status.FromError(s.status(br.Err))
		pair.Response = &v1.CheckBulkPermissionsPair_Error{Error: st.Proto()}
		return pair
	}
	pair.Response = &v1.CheckBulkPermissionsPair_Item{Item: &v1.CheckBulkPermissionsResponseItem{
		Permissionship:    permissionshipToV1(br.Result.Membership),
		PartialCaveatInfo: partialCaveatInfo(br.Result),
	}}
	return pair
}

var errBulkLength = errors.New("engine returned a different number of bulk results than items")
