package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	mv0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
)

// AuthZed Materialize's API (authzed.api.materialize.v0) over latch's own data: the
// permission sets are read from the store at a revision and their changes are
// derived from its change feed (materialize.PermissionSets), so every node of a
// cluster serves the same answers from the shared store.

// startPermissionSets checks the configured targets against the schema in force
// (when one was written: a later schema is checked as it is written, and a watch
// reports it as a breaking schema change) and makes the API's source of sets.
func (s *Server) startPermissionSets(ctx context.Context) error {
	s.permsets = materialize.NewPermissionSets(s.store, s.schemaAtRevision, s.cfg.Materialize)
	if len(s.cfg.Materialize) == 0 {
		return nil
	}
	head, err := s.store.HeadRevision(ctx)
	if err != nil {
		return err
	}
	if sch, err := s.schemaAtRevision(ctx, head); err != nil || sch == nil || len(sch.Definitions) == 0 {
		return err
	}
	if err := s.permsets.Check(ctx, head); err != nil {
		return fmt.Errorf("--materialize: %w", err)
	}
	return nil
}

// schemaAtRevision returns the compiled schema in force at rev (nil when none).
func (s *Server) schemaAtRevision(ctx context.Context, rev store.Revision) (*ir.Schema, error) {
	r, err := s.store.Reader(ctx, rev)
	if err != nil {
		return nil, err
	}
	return s.schemas.atRevision(ctx, r)
}

// registerMaterialize registers the Materialize services on g.
func (s *Server) registerMaterialize(g *grpc.Server) {
	g.RegisterService(invalidOnDecodeError(&mv0.WatchPermissionSetsService_ServiceDesc), &permissionSetsService{s: s})
	g.RegisterService(invalidOnDecodeError(&mv0.WatchPermissionsService_ServiceDesc), &watchPermissionsService{s: s})
	g.RegisterService(invalidOnDecodeError(&mv0.RoaringLookupResourcesService_ServiceDesc), &roaringService{s: s})
	g.RegisterService(invalidOnDecodeError(&mv0.RelationshipsService_ServiceDesc), &relationshipsService{s: s})
}

// permissionSetsService implements WatchPermissionSetsService.
type permissionSetsService struct {
	mv0.UnimplementedWatchPermissionSetsServiceServer
	s *Server
}

// takeWatchSlot holds one of the --max-watch-streams places until release.
func (s *Server) takeWatchSlot() (release func(), err error) {
	select {
	case s.watchSlots <- struct{}{}:
		return func() { <-s.watchSlots }, nil
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "too many watch streams: %d are open, the most this server serves (--max-watch-streams); retry later or share one stream", cap(s.watchSlots))
	}
}

// startSetsWatch opens what both Materialize watches need, in the order that frees
// nothing on failure: the store's shared watch, a slot of --max-watch-streams, the
// revision after which to stream, and a check that the configuration can be streamed
// from there. what names the call in the error of a store that cannot watch. Its
// errors are statuses; release frees the slot.
func (s *Server) startSetsWatch(ctx context.Context, what string, token *v1.ZedToken) (watcher *changefeed.Hub, after store.Revision, release func(), err error) {
	watcher = s.watchHub()
	if watcher == nil {
		return nil, 0, nil, s.status(&unsupportedError{what + " on this datastore"})
	}
	if release, err = s.takeWatchSlot(); err != nil {
		return nil, 0, nil, err
	}
	if after, err = s.watchStart(ctx, token); err == nil {
		err = s.permsets.Check(ctx, after)
	}
	if err != nil {
		release()
		return nil, 0, nil, s.status(err)
	}
	return watcher, after, release, nil
}

// WatchPermissionSets streams the changes of the permission sets after the token (or
// from now): each revision's changes, then its completed_revision; a breaking schema
// change as breaking_schema_change then lookup_permission_sets_required at its
// revision (the sets are read from the store, so the new snapshot is ready at once).
func (p *permissionSetsService) WatchPermissionSets(req *mv0.WatchPermissionSetsRequest, stream mv0.WatchPermissionSetsService_WatchPermissionSetsServer) error {
	s := p.s
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	watcher, after, release, err := s.startSetsWatch(ctx, "watching permission sets", req.GetOptionalStartingAfter())
	if err != nil {
		return err
	}
	defer release()
	snd := startWatchSender(stream.Send)
	err = func() error {
		for ev, err := range s.permsets.Watch(ctx, watcher, after, watchCheckpointInterval) {
			if err != nil {
				return err
			}
			for _, resp := range setEventResponses(ev) {
				if err := snd.push(ctx, resp); err != nil {
					return err
				}
			}
		}
		return ctx.Err()
	}()
	cancel()
	return s.status(snd.finish(err))
}

// setEventResponses renders one event of the permission sets.
func setEventResponses(ev materialize.SetEvent) []*mv0.WatchPermissionSetsResponse {
	tok := tokenFor(ev.Revision)
	switch ev.Kind {
	case materialize.EventChange:
		return []*mv0.WatchPermissionSetsResponse{{Response: &mv0.WatchPermissionSetsResponse_Change{Change: setChange(ev.Pair, ev.Added, tok)}}}
	case materialize.EventBreaking:
		b := &mv0.BreakingSchemaChange{ChangeAt: tok}
		for _, t := range ev.Affected {
			b.AffectedPermissions = append(b.AffectedPermissions, &mv0.WatchedPermission{ResourceType: t.Resource, Permission: t.Permission, SubjectType: t.SubjectType})
		}
		return []*mv0.WatchPermissionSetsResponse{
			{Response: &mv0.WatchPermissionSetsResponse_BreakingSchemaChange{BreakingSchemaChange: b}},
			{Response: &mv0.WatchPermissionSetsResponse_LookupPermissionSetsRequired{LookupPermissionSetsRequired: &mv0.LookupPermissionSetsRequired{RequiredLookupAt: tok}}},
		}
	}
	return []*mv0.WatchPermissionSetsResponse{{Response: &mv0.WatchPermissionSetsResponse_CompletedRevision{CompletedRevision: tok}}}
}

// setChange renders one pair added or removed at a revision.
func setChange(pr materialize.Pair, added bool, tok *v1.ZedToken) *mv0.PermissionSetChange {
	op := mv0.PermissionSetChange_SET_OPERATION_REMOVED
	if added {
		op = mv0.PermissionSetChange_SET_OPERATION_ADDED
	}
	c := &mv0.PermissionSetChange{
		AtRevision: tok, Operation: op,
		ParentSet: &mv0.SetReference{ObjectType: pr.Set.Type, ObjectId: pr.Set.ID, PermissionOrRelation: pr.Set.Relation},
	}
	if pr.Child.IsSet {
		c.Child = &mv0.PermissionSetChange_ChildSet{ChildSet: &mv0.SetReference{ObjectType: pr.Child.Type, ObjectId: pr.Child.ID, PermissionOrRelation: pr.Child.Relation}}
	} else {
		c.Child = &mv0.PermissionSetChange_ChildMember{ChildMember: &mv0.MemberReference{ObjectType: pr.Child.Type, ObjectId: pr.Child.ID, OptionalPermissionOrRelation: pr.Child.Relation}}
	}
	return c
}

// lookupRequestError: a LookupPermissionSets request that cannot be served as asked.
type lookupRequestError struct{ msg string }

func (e *lookupRequestError) Error() string { return e.msg }

// LookupPermissionSets streams the permission sets at a revision (the cursor's, else
// optional_at_revision, else the head), limit pairs per call, each with the cursor
// that resumes after it; the last pair of the sets has completed_members set (so
// does a call that sends fewer than limit).
func (p *permissionSetsService) LookupPermissionSets(req *mv0.LookupPermissionSetsRequest, stream mv0.WatchPermissionSetsService_LookupPermissionSetsServer) error {
	s := p.s
	ctx := stream.Context()
	limit := req.GetLimit()
	var (
		rev    store.Revision
		pos    materialize.LookupPosition
		offset uint32
		sig    uint64
		err    error
	)
	if c := req.GetOptionalStartingAfterCursor(); c != nil {
		if limit != 0 && limit != c.GetLimit() {
			return s.status(&lookupRequestError{fmt.Sprintf("the request's limit %d does not match the limit %d of the cursor: resume with the limit the first call used (or none)", limit, c.GetLimit())})
		}
		limit = c.GetLimit()
		if rev, err = decodeToken(c.GetToken()); err != nil {
			return s.status(err)
		}
		if pos, sig, err = decodeSetCursor(c.GetCursor()); err != nil {
			return s.status(err)
		}
		offset = c.GetStartingIndex()
	} else if t := req.GetOptionalAtRevision(); t != nil {
		if rev, err = decodeToken(t); err != nil {
			return s.status(err)
		}
	} else if rev, err = s.store.HeadRevision(ctx); err != nil {
		return s.status(err)
	}
	if limit == 0 {
		return s.status(&lookupRequestError{"limit is required: the number of permission set changes to stream in this call"})
	}
	sigText, err := s.permsets.Signature(ctx, rev)
	if err != nil {
		return s.status(err)
	}
	graphSig := sigHash(sigText)
	if req.GetOptionalStartingAfterCursor() != nil && sig != graphSig {
		return s.status(&invalidCursorError{"the cursor was issued for another schema or configuration of the permission sets"})
	}
	tok := tokenFor(rev)
	// Each pair is sent once the next is known, so that the last one says it is.
	var pending *mv0.LookupPermissionSetsResponse
	var sent uint32
	more := false
	err = s.permsets.Lookup(ctx, rev, pos, func(pr materialize.Pair, next materialize.LookupPosition) bool {
		if pending != nil {
			if sent == limit {
				more = true
				return false
			}
			if err = stream.Send(pending); err != nil {
				return false
			}
		}
		sent++
		pending = &mv0.LookupPermissionSetsResponse{
			Change: setChange(pr, true, tok),
			Cursor: &mv0.Cursor{Limit: limit, Token: tok, StartingIndex: offset + sent, StartingKey: pr.Set.Type, Cursor: encodeSetCursor(next, graphSig)},
		}
		return true
	})
	if err != nil {
		return s.status(err)
	}
	if pending == nil {
		return nil
	}
	pending.Cursor.CompletedMembers = !more
	return s.status(stream.Send(pending))
}

// setCursorVersion leads every encoded position of a lookup.
const setCursorVersion = 1

// encodeSetCursor writes a lookup position and the signature of the sets it is in.
func encodeSetCursor(pos materialize.LookupPosition, sig uint64) string {
	b := []byte{setCursorVersion}
	b = binary.BigEndian.AppendUint64(b, sig)
	b = binary.AppendUvarint(b, uint64(pos.TypeIndex))
	b = binary.AppendUvarint(b, uint64(pos.Skip))
	b = append(b, pos.After...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeSetCursor(s string) (materialize.LookupPosition, uint64, error) {
	bad := func(why string) (materialize.LookupPosition, uint64, error) {
		return materialize.LookupPosition{}, 0, &invalidCursorError{"the permission sets cursor " + why}
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 9 || b[0] != setCursorVersion {
		return bad("is not one this server issued")
	}
	sig := binary.BigEndian.Uint64(b[1:9])
	b = b[9:]
	ti, n := binary.Uvarint(b)
	if n <= 0 || ti > 1<<20 {
		return bad("is malformed")
	}
	b = b[n:]
	skip, n := binary.Uvarint(b)
	if n <= 0 || skip > 1<<31 {
		return bad("is malformed")
	}
	return materialize.LookupPosition{TypeIndex: int(ti), Skip: int(skip), After: store.Cursor(b[n:])}, sig, nil
}

// sigHash is the 64-bit hash a cursor carries of the sets' signature.
func sigHash(sig string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(sig))
	return h.Sum64()
}
