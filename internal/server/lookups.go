package server

import (
	"context"
	"encoding/binary"
	"errors"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// Lookup paging. A cursor is the revision a lookup runs at plus where the next page
// starts, in one of two forms:
//
//   - after an id, for LookupSubjects and for LookupResources pages (a request with a
//     limit, or a cursor of this form): the engine yields subjects, and its ordered
//     lookup resources, in id order and reads or checks nothing at or before the id,
//     so a page costs about one page's work, not that of the pages before it;
//   - after a number of results, for a LookupResources stream without a limit (whose
//     results come as they are proven, not in id order): the engine yields results in
//     an order that is the same for the same request at the same revision, so the
//     next page re-runs the lookup and skips them. That costs the skipped work again
//     but never duplicates or loses a result.
const (
	countCursor byte = 1 // then the number of results returned, as a uvarint
	idCursor    byte = 2 // then the last id returned
)

// maxLookupLimit is the largest page a lookup accepts, SpiceDB's default for
// LookupResources; LookupSubjects' concrete limit, which SpiceDB does not implement,
// gets the same bound.
const maxLookupLimit = 1000

// checkLookupLimit refuses a page larger than maxLookupLimit.
func checkLookupLimit(limit uint32) error {
	if limit > maxLookupLimit {
		return &limitTooLargeError{int(limit), maxLookupLimit}
	}
	return nil
}

// errPageFull stops an engine lookup once a page is complete.
var errPageFull = errors.New("page full")

// lookupQuery is the part of a lookup request a cursor is bound to: everything but the
// paging fields and the consistency (a cursor carries its own revision).
func lookupQuery(req proto.Message) proto.Message {
	q := proto.Clone(req)
	switch m := q.(type) {
	case *v1.LookupResourcesRequest:
		m.OptionalCursor, m.OptionalLimit, m.Consistency = nil, 0, nil
	case *v1.LookupSubjectsRequest:
		m.OptionalCursor, m.OptionalConcreteLimit, m.Consistency = nil, 0, nil
	}
	return q
}

// lookupPosition is where a page starts: after the first skip results of the streamed
// order, or, when after is set (an id is never empty), after that id of the ordered
// one.
type lookupPosition struct {
	skip  uint64
	after string
}

// lookupStart checks a lookup's page size, then opens the reader it runs at, the schema
// in force there and where the page starts: the cursor's revision and position when
// there is a cursor, else the requested consistency and the start.
func (s *Server) lookupStart(ctx context.Context, limit uint32, c *v1.Consistency, cur *v1.Cursor, query proto.Message) (store.Reader, *ir.Schema, lookupPosition, error) {
	var pos lookupPosition
	if err := checkLookupLimit(limit); err != nil {
		return nil, nil, pos, err
	}
	var r store.Reader
	var err error
	if cur == nil {
		r, err = s.readerFor(ctx, c)
	} else {
		var rc readCursor
		if rc, err = decodeCursor(cur, query); err != nil {
			return nil, nil, pos, err
		}
		if pos, err = decodePosition(string(rc.after)); err != nil {
			return nil, nil, pos, err
		}
		r, err = s.store.Reader(ctx, rc.rev)
	}
	if err != nil {
		return nil, nil, pos, err
	}
	sch, err := s.schemas.atRevision(ctx, r)
	if err != nil {
		return nil, nil, pos, err
	}
	return r, sch, pos, nil
}

// decodePosition reads the position of a lookup cursor (see countCursor and idCursor).
func decodePosition(b string) (lookupPosition, error) {
	if len(b) >= 2 {
		switch b[0] {
		case countCursor:
			if skip, n := binary.Uvarint([]byte(b[1:])); n > 0 && n == len(b)-1 {
				return lookupPosition{skip: skip}, nil
			}
		case idCursor:
			return lookupPosition{after: b[1:]}, nil
		}
	}
	return lookupPosition{}, &invalidCursorError{"not a lookup cursor"}
}

// countPosition and idPosition encode a lookup cursor's position.
func countPosition(done uint64) string {
	return string(binary.AppendUvarint([]byte{countCursor}, done))
}
func idPosition(id string) string { return string([]byte{idCursor}) + id }

func lookupCursor(rev store.Revision, query [8]byte, pos string) *v1.Cursor {
	return encodeCursor(readCursor{rev: rev, filter: query, after: store.Cursor(pos)})
}

func lookupPermissionship(m engine.Membership) v1.LookupPermissionship {
	if m == engine.Conditional {
		return v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_CONDITIONAL_PERMISSION
	}
	return v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_HAS_PERMISSION
}

// LookupResources streams every resource of a type on which the subject has the
// permission, walking the graph backwards from the subject.
func (p *permissionsService) LookupResources(req *v1.LookupResourcesRequest, stream v1.PermissionsService_LookupResourcesServer) error {
	ctx := stream.Context()
	query := lookupQuery(req)
	r, sch, pos, err := p.s.lookupStart(ctx, req.GetOptionalLimit(), req.GetConsistency(), req.GetOptionalCursor(), query)
	if err != nil {
		return p.s.status(err)
	}
	at, qh, limit := tokenFor(r.Revision()), queryHash(query), uint64(req.GetOptionalLimit())
	// A page of a paged lookup starts after an id (see idCursor); a stream without a
	// limit, or one resumed from a cursor of such a stream, goes in proven order.
	ordered := pos.after != "" || limit > 0 && req.GetOptionalCursor() == nil
	lreq := engine.LookupResourcesRequest{
		ResourceType: req.GetResourceObjectType(),
		Permission:   req.GetPermission(),
		Subject:      relv1.FromSubject(req.GetSubject()),
		Context:      relv1.FromContext(req.GetContext()),
		Ordered:      ordered,
		After:        pos.after,
	}
	var seen, sent uint64
	err = p.s.engine.LookupResources(ctx, sch, r, lreq, func(f engine.FoundResource) error {
		seen++
		if seen <= pos.skip {
			return nil
		}
		if limit > 0 && sent == limit {
			return errPageFull
		}
		sent++
		next := countPosition(seen)
		if ordered {
			next = idPosition(f.ID)
		}
		return stream.Send(&v1.LookupResourcesResponse{
			LookedUpAt:        at,
			ResourceObjectId:  f.ID,
			Permissionship:    lookupPermissionship(f.Result.Membership),
			PartialCaveatInfo: partialCaveatInfo(f.Result),
			AfterResultCursor: lookupCursor(r.Revision(), qh, next),
		})
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return p.s.status(err)
	}
	return nil
}

// LookupSubjects streams every subject of a type that has the permission on the
// resource, in id order as the engine merges them, then the wildcards (with the
// subjects they exclude) if there are any. Unlike SpiceDB, optional_concrete_limit and
// optional_cursor page the concrete subjects: a cursor holds the last subject id (past
// every id after a wildcard), and the next page starts after it without walking the
// pages before. The wildcards, which do not count against the limit, come with the
// page that ends the concrete subjects.
func (p *permissionsService) LookupSubjects(req *v1.LookupSubjectsRequest, stream v1.PermissionsService_LookupSubjectsServer) error {
	ctx := stream.Context()
	query := lookupQuery(req)
	r, sch, pos, err := p.s.lookupStart(ctx, req.GetOptionalConcreteLimit(), req.GetConsistency(), req.GetOptionalCursor(), query)
	if err != nil {
		return p.s.status(err)
	}
	switch {
	case pos.skip > 0:
		return p.s.status(&invalidCursorError{"not a cursor of this lookup"})
	case pos.after == afterWildcards:
		return nil
	}
	lreq := engine.LookupSubjectsRequest{
		Resource:        relv1.FromObject(req.GetResource()),
		Permission:      req.GetPermission(),
		SubjectType:     req.GetSubjectObjectType(),
		SubjectRelation: req.GetOptionalSubjectRelation(),
		Context:         relv1.FromContext(req.GetContext()),
		After:           pos.after,
	}
	noWildcards := req.GetWildcardOption() == v1.LookupSubjectsRequest_WILDCARD_OPTION_EXCLUDE_WILDCARDS
	at, qh, limit := tokenFor(r.Revision()), queryHash(query), uint64(req.GetOptionalConcreteLimit())
	var sent uint64
	err = p.s.engine.LookupSubjects(ctx, sch, r, lreq, func(f engine.FoundSubject) error {
		next := f.ID
		if f.ID == rel.Wildcard {
			if noWildcards {
				return nil
			}
			next = afterWildcards
		} else {
			if limit > 0 && sent == limit {
				return errPageFull
			}
			sent++
		}
		return stream.Send(lookupSubjectsResponse(f, at, lookupCursor(r.Revision(), qh, idPosition(next))))
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return p.s.status(err)
	}
	return nil
}

// afterWildcards is the position of a LookupSubjects after its wildcards, which follow
// every concrete subject: greater than any object id.
const afterWildcards = "\x7f"

// lookupSubjectsResponse fills both the current fields and the deprecated ones older
// clients read.
func lookupSubjectsResponse(f engine.FoundSubject, at *v1.ZedToken, cursor *v1.Cursor) *v1.LookupSubjectsResponse {
	subject := resolvedSubject(f)
	resp := &v1.LookupSubjectsResponse{
		LookedUpAt:        at,
		Subject:           subject,
		SubjectObjectId:   subject.SubjectObjectId,
		Permissionship:    subject.Permissionship,
		PartialCaveatInfo: subject.PartialCaveatInfo,
		AfterResultCursor: cursor,
	}
	for _, ex := range f.Excluded {
		resp.ExcludedSubjects = append(resp.ExcludedSubjects, resolvedSubject(ex))
		resp.ExcludedSubjectIds = append(resp.ExcludedSubjectIds, ex.ID)
	}
	return resp
}

func resolvedSubject(f engine.FoundSubject) *v1.ResolvedSubject {
	return &v1.ResolvedSubject{
		SubjectObjectId:   f.ID,
		Permissionship:    lookupPermissionship(f.Result.Membership),
		PartialCaveatInfo: partialCaveatInfo(f.Result),
	}
}
