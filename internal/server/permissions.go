package server

import (
	"context"
	"errors"

	"github.com/authzed/authzed-go/pkg/requestmeta"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
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
	if req.GetWithTracing() || debugHeader(ctx) {
		return p.checkTraced(ctx, r, sch, creq, req.GetSubject())
	}
	res, err := p.s.engine.Check(ctx, sch, r, creq)
	if err != nil {
		return nil, p.s.status(err)
	}
	p.s.observeCheckQueries(r)
	return checkResponse(r, res), nil
}

// checkTraced answers a check that asked for with_tracing, returning how it was
// answered in debug_trace.
func (p *permissionsService) checkTraced(ctx context.Context, r store.Reader, sch *ir.Schema, creq engine.CheckRequest, subject *v1.SubjectReference) (*v1.CheckPermissionResponse, error) {
	res, trace, err := p.s.engine.CheckTraced(ctx, sch, r, creq)
	if err != nil {
		return nil, p.s.status(err)
	}
	p.s.observeCheckQueries(r)
	w := newTraceWriter(sch)
	resp := checkResponse(r, res)
	resp.DebugTrace = w.info(subject, trace)
	return resp, nil
}

// debugHeader: the request carries the header clients asked for a check's trace with
// before with_tracing; SpiceDB still answers it with debug_trace, as latch does.
func debugHeader(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, string(requestmeta.RequestDebugInformation))) > 0
}

func checkResponse(r store.Reader, res engine.Result) *v1.CheckPermissionResponse {
	return &v1.CheckPermissionResponse{
		CheckedAt:         tokenFor(r.Revision()),
		Permissionship:    permissionshipToV1(res.Membership),
		PartialCaveatInfo: partialCaveatInfo(res),
	}
}

func (s *Server) observeCheckQueries(r store.Reader) {
	if tr, ok := r.(*timedReader); ok {
		s.metrics.checkQueries.Observe(float64(tr.queries.Load()))
	}
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
	var results []engine.BulkResult
	var w *traceWriter
	if req.GetWithTracing() {
		results = p.s.engine.CheckBulkTraced(ctx, sch, r, creqs)
		w = newTraceWriter(sch)
	} else {
		results = p.s.engine.CheckBulk(ctx, sch, r, creqs)
	}
	if len(results) != len(items) {
		return nil, p.s.status(internalError{errBulkLength})
	}
	if err := ctx.Err(); err != nil {
		return nil, p.s.status(err)
	}
	resp := &v1.CheckBulkPermissionsResponse{CheckedAt: tokenFor(r.Revision()), Pairs: make([]*v1.CheckBulkPermissionsPair, len(items))}
	for i, it := range items {
		resp.Pairs[i] = p.s.bulkPair(it, results[i], w)
	}
	return resp, nil
}

// bulkPair is one item's answer; with w (the request asked for with_tracing), its
// debug_trace too.
func (s *Server) bulkPair(it *v1.CheckBulkPermissionsRequestItem, br engine.BulkResult, w *traceWriter) *v1.CheckBulkPermissionsPair {
	pair := &v1.CheckBulkPermissionsPair{Request: it}
	if br.Err != nil {
		st, _ := status.FromError(s.status(br.Err))
		pair.Response = &v1.CheckBulkPermissionsPair_Error{Error: st.Proto()}
		return pair
	}
	item := &v1.CheckBulkPermissionsResponseItem{
		Permissionship:    permissionshipToV1(br.Result.Membership),
		PartialCaveatInfo: partialCaveatInfo(br.Result),
	}
	if w != nil && br.Trace != nil {
		item.DebugTrace = w.info(it.GetSubject(), br.Trace)
	}
	pair.Response = &v1.CheckBulkPermissionsPair_Item{Item: item}
	return pair
}

var errBulkLength = errors.New("engine returned a different number of bulk results than items")
