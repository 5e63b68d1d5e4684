package openfga

import (
	"context"
	"errors"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/fga"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Snapshot is what one request evaluates with: a model, a reader at the revision the
// request's consistency picks (hiding the tuples the model does not admit), and the
// engine for both.
type Snapshot struct {
	Model  *fga.Model
	Reader store.Reader
	Engine *engine.Engine
	// base is the reader before contextual tuples; engine evaluates it.
	base       store.Reader
	baseEngine *engine.Engine
}

// reader opens a reader at the revision a consistency preference picks:
// MINIMIZE_LATENCY a recent quantized revision, shared by the requests of a window
// (latch's minimize_latency); HIGHER_CONSISTENCY and no preference the newest
// (fully_consistent), as OpenFGA without its check cache reads.
func (st *fgaStore) reader(ctx context.Context, c openfgav1.ConsistencyPreference) (store.Reader, error) {
	var rev store.Revision
	var err error
	if c == openfgav1.ConsistencyPreference_MINIMIZE_LATENCY {
		rev, err = st.quantizer.Revision(ctx)
	} else {
		rev, err = st.data.HeadRevision(ctx)
	}
	if err != nil {
		return nil, storeError(err)
	}
	r, err := st.data.Reader(ctx, rev)
	return r, storeError(err)
}

func (st *fgaStore) snapshot(ctx context.Context, modelID string, c openfgav1.ConsistencyPreference) (*Snapshot, error) {
	r, err := st.reader(ctx, c)
	if err != nil {
		return nil, err
	}
	cm, err := st.modelFor(ctx, r, modelID)
	if err != nil {
		return nil, err
	}
	ar, err := cm.model.Reader(r, nil, time.Now())
	if err != nil {
		return nil, fgaErr(err)
	}
	return &Snapshot{Model: cm.model, Reader: ar, Engine: cm.engine, base: ar, baseEngine: cm.engine}, nil
}

// WithContextual returns the snapshot with a request's contextual tuples added,
// evaluated by an uncached engine (their answers are not the revision's).
func (s *Snapshot) WithContextual(tuples []*openfgav1.TupleKey) (*Snapshot, error) {
	if len(tuples) == 0 {
		return &Snapshot{Model: s.Model, Reader: s.base, Engine: s.baseEngine, base: s.base, baseEngine: s.baseEngine}, nil
	}
	r, err := s.Model.Reader(s.base, tuples, time.Now())
	if err != nil {
		return nil, fgaErr(err)
	}
	return &Snapshot{Model: s.Model, Reader: r, Engine: s.baseEngine.Uncached(), base: s.base, baseEngine: s.baseEngine}, nil
}

// Check answers whether user has relation on object. A condition missing a
// parameter fails the check, as in OpenFGA.
func (s *Snapshot) Check(ctx context.Context, object, relation, user string, context *structpb.Struct) (bool, error) {
	req, err := s.Model.CheckRequest(object, relation, user, context)
	if err != nil {
		return false, fgaErr(err)
	}
	res, err := s.Engine.Check(ctx, s.Model.Schema, s.Reader, req)
	if err != nil {
		return false, fgaErr(err)
	}
	ok, err := fga.Allowed(res)
	return ok, fgaErr(err)
}

// fgaErr maps an error of package fga, the engine or the store to OpenFGA's status.
func fgaErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if code := fga.ErrorCode(err); code != 0 {
		return fgaError(code, "%s", err.Error())
	}
	return storeError(err)
}

// tupleError is fgaErr for a tuple's translation.
func tupleError(err error) error { return fgaErr(err) }

// requestSnapshot opens the snapshot of a request naming a store, a model and a
// consistency preference.
func (s *Service) requestSnapshot(ctx context.Context, storeID, modelID string, c openfgav1.ConsistencyPreference, contextual []*openfgav1.TupleKey) (*Snapshot, error) {
	st, err := s.store(storeID)
	if err != nil {
		return nil, err
	}
	snap, err := st.snapshot(ctx, modelID, c)
	if err != nil {
		return nil, err
	}
	return snap.WithContextual(contextual)
}

// Check answers one check.
func (s *Service) Check(ctx context.Context, req *openfgav1.CheckRequest) (*openfgav1.CheckResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	snap, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), req.GetContextualTuples().GetTupleKeys())
	if err != nil {
		return nil, err
	}
	tk := req.GetTupleKey()
	ok, err := snap.Check(ctx, tk.GetObject(), tk.GetRelation(), tk.GetUser(), req.GetContext())
	if err != nil {
		return nil, err
	}
	return &openfgav1.CheckResponse{Allowed: ok}, nil
}

// BatchCheck answers several checks, each with its own contextual tuples and
// context; an item that fails has its error in its result, not the call's.
func (s *Service) BatchCheck(ctx context.Context, req *openfgav1.BatchCheckRequest) (*openfgav1.BatchCheckResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	if n := len(req.GetChecks()); n > s.cfg.MaxChecksPerBatch {
		return nil, validationError("batchCheck received %d checks, the maximum allowed is %d", n, s.cfg.MaxChecksPerBatch)
	}
	seen := make(map[string]bool, len(req.GetChecks()))
	for _, item := range req.GetChecks() {
		id := item.GetCorrelationId()
		if seen[id] {
			return nil, validationError("duplicate correlation_id provided: %s", id)
		}
		seen[id] = true
	}
	base, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), nil)
	if err != nil {
		return nil, err
	}
	out := &openfgav1.BatchCheckResponse{Result: make(map[string]*openfgav1.BatchCheckSingleResult, len(req.GetChecks()))}
	// The items without contextual tuples share the request's reader and go to the
	// engine as one bulk check, which shares their subproblems; the others each read
	// their own tuples.
	var bulk []engine.CheckRequest
	var bulkIDs []string
	for _, item := range req.GetChecks() {
		if ctx.Err() != nil {
			return nil, storeError(ctx.Err())
		}
		id, tk := item.GetCorrelationId(), item.GetTupleKey()
		if len(item.GetContextualTuples().GetTupleKeys()) > 0 {
			snap, err := base.WithContextual(item.GetContextualTuples().GetTupleKeys())
			var ok bool
			if err == nil {
				ok, err = snap.Check(ctx, tk.GetObject(), tk.GetRelation(), tk.GetUser(), item.GetContext())
			}
			out.Result[id] = batchResult(ok, err)
			continue
		}
		cr, err := base.Model.CheckRequest(tk.GetObject(), tk.GetRelation(), tk.GetUser(), item.GetContext())
		if err != nil {
			out.Result[id] = batchResult(false, fgaErr(err))
			continue
		}
		bulk, bulkIDs = append(bulk, cr), append(bulkIDs, id)
	}
	if len(bulk) > 0 {
		for i, res := range base.Engine.CheckBulk(ctx, base.Model.Schema, base.Reader, bulk) {
			ok, err := res.Result.Membership == engine.HasPermission, res.Err
			if err == nil {
				ok, err = fga.Allowed(res.Result)
			}
			out.Result[bulkIDs[i]] = batchResult(ok, fgaErr(err))
		}
	}
	return out, nil
}

// batchResult is one BatchCheck item's answer: allowed, or its error.
func batchResult(ok bool, err error) *openfgav1.BatchCheckSingleResult {
	if err == nil {
		return &openfgav1.BatchCheckSingleResult{CheckResult: &openfgav1.BatchCheckSingleResult_Allowed{Allowed: ok}}
	}
	st, _ := status.FromError(err)
	ce := &openfgav1.CheckError{Message: st.Message()}
	if code := int32(st.Code()); code >= 2000 && code < 3000 {
		ce.Code = &openfgav1.CheckError_InputError{InputError: openfgav1.ErrorCode(code)}
	} else {
		ce.Code = &openfgav1.CheckError_InternalError{InternalError: openfgav1.InternalErrorCode(fromStatus(st))}
	}
	return &openfgav1.BatchCheckSingleResult{CheckResult: &openfgav1.BatchCheckSingleResult_Error{Error: ce}}
}

// fromStatus is the internal error code of a status that is not an input error.
func fromStatus(st *status.Status) int32 {
	if code := int32(st.Code()); code >= 4000 && code < 5000 {
		return code
	}
	return int32(openfgav1.InternalErrorCode_internal_error)
}

// errCapped stops a lookup that has given all the results asked for.
var errCapped = errors.New("result cap reached")

// Objects yields the objects ("type:id") of typ on which user has relation as they
// are found (fga.StreamObjects), each once, at most limit (0: no limit).
func (s *Snapshot) Objects(ctx context.Context, typ, relation, user string, context *structpb.Struct, limit int, yield func(string) error) error {
	req, err := s.Model.LookupResourcesRequest(typ, relation, user, context)
	if err != nil {
		return fgaErr(err)
	}
	n := 0
	err = fga.StreamObjects(ctx, s.Engine, s.Model, s.Reader, req, func(id string) error {
		if err := yield(typ + ":" + id); err != nil {
			return err
		}
		if n++; limit > 0 && n >= limit {
			return errCapped
		}
		return nil
	})
	if errors.Is(err, errCapped) {
		return nil
	}
	return fgaErr(err)
}

// ListObjects lists the objects a user has a relation on, sorted, the first
// ListObjectsMaxResults of them (OpenFGA's 1,000 by default).
func (s *Service) ListObjects(ctx context.Context, req *openfgav1.ListObjectsRequest) (*openfgav1.ListObjectsResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	snap, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), req.GetContextualTuples().GetTupleKeys())
	if err != nil {
		return nil, err
	}
	lr, err := snap.Model.LookupResourcesRequest(req.GetType(), req.GetRelation(), req.GetUser(), req.GetContext())
	if err != nil {
		return nil, fgaErr(err)
	}
	ids, err := fga.ListObjects(ctx, snap.Engine, snap.Model, snap.Reader, lr)
	if err != nil {
		return nil, fgaErr(err)
	}
	if limit := s.cfg.ListObjectsMaxResults; limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := &openfgav1.ListObjectsResponse{Objects: make([]string, len(ids))}
	for i, id := range ids {
		out.Objects[i] = req.GetType() + ":" + id
	}
	return out, nil
}

// StreamedListObjects streams every object a user has a relation on, as found: no
// cap unless StreamedListObjectsMaxResults sets one, and no deadline but the call's.
func (s *Service) StreamedListObjects(req *openfgav1.StreamedListObjectsRequest, srv openfgav1.OpenFGAService_StreamedListObjectsServer) error {
	if err := validated(req); err != nil {
		return err
	}
	ctx := srv.Context()
	snap, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), req.GetContextualTuples().GetTupleKeys())
	if err != nil {
		return err
	}
	return snap.Objects(ctx, req.GetType(), req.GetRelation(), req.GetUser(), req.GetContext(), s.cfg.StreamedListObjectsMaxResults, func(obj string) error {
		return srv.Send(&openfgav1.StreamedListObjectsResponse{Object: obj})
	})
}

// ListUsers lists the users of each filter's type or subject set that have a
// relation on an object.
func (s *Service) ListUsers(ctx context.Context, req *openfgav1.ListUsersRequest) (*openfgav1.ListUsersResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	snap, err := s.requestSnapshot(ctx, req.GetStoreId(), req.GetAuthorizationModelId(), req.GetConsistency(), req.GetContextualTuples())
	if err != nil {
		return nil, err
	}
	obj := rel.ObjectRef{Type: req.GetObject().GetType(), ID: req.GetObject().GetId()}
	users, err := snap.Users(ctx, obj, req.GetRelation(), req.GetUserFilters(), req.GetContext())
	if err != nil {
		return nil, err
	}
	return &openfgav1.ListUsersResponse{Users: users}, nil
}

// Users lists the users of each filter's type or subject set that have relation on
// object (OpenFGA's ListUsers).
func (s *Snapshot) Users(ctx context.Context, object rel.ObjectRef, relation string, filters []*openfgav1.UserTypeFilter, context *structpb.Struct) ([]*openfgav1.User, error) {
	users, err := fga.ListUsers(ctx, s.Model, s.Reader, object, relation, filters, context.AsMap())
	if err != nil {
		return nil, fgaErr(err)
	}
	if users == nil {
		users = []*openfgav1.User{}
	}
	return users, nil
}
