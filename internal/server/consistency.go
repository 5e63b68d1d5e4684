package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// revisionFor picks the revision a read runs at. It is the one place consistency is
// decided: fully_consistent reads the head; at_exact_snapshot the token's revision;
// minimize_latency (and no consistency) a recent quantized revision, shared by the
// requests of a window; at_least_as_fresh the newer of that and the token's. A token
// SpiceDB issued names no revision here: at_least_as_fresh reads the head, which is
// fresh enough for any of them, and at_exact_snapshot is refused.
func (s *Server) revisionFor(ctx context.Context, c *v1.Consistency) (store.Revision, error) {
	switch req := c.GetRequirement().(type) {
	case *v1.Consistency_FullyConsistent:
		return s.store.HeadRevision(ctx)
	case *v1.Consistency_AtLeastAsFresh:
		tok, err := decodeToken(req.AtLeastAsFresh)
		if _, ok := errors.AsType[*zedtoken.ForeignError](err); ok {
			return s.store.HeadRevision(ctx)
		}
		if err != nil {
			return 0, err
		}
		recent, err := s.quantizer.Revision(ctx)
		if err != nil {
			return 0, err
		}
		return max(recent, tok), nil
	case *v1.Consistency_AtExactSnapshot:
		return decodeToken(req.AtExactSnapshot)
	default:
		return s.quantizer.Revision(ctx)
	}
}

// headConsistency reads the newest revision, for calls that must see every write
// (schema reads, validating a delete's filter).
var headConsistency = &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}}

// readerAndSchema opens a reader at the revision c asks for and returns the schema in
// force there.
func (s *Server) readerAndSchema(ctx context.Context, c *v1.Consistency) (store.Reader, *ir.Schema, error) {
	r, err := s.readerFor(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	sch, err := s.schemas.atRevision(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	return r, sch, nil
}

// readerFor opens a reader at the revision c asks for, timing its queries. Reads may
// be answered by a read replica that has reached their revision, except
// fully_consistent ones, which go to the primary as in SpiceDB: they read the head,
// which a replica has rarely replayed yet.
func (s *Server) readerFor(ctx context.Context, c *v1.Consistency) (store.Reader, error) {
	rev, err := s.revisionFor(ctx, c)
	if err != nil {
		return nil, err
	}
	open := s.store.Reader
	if rs, ok := s.store.(store.Replicated); ok && c.GetFullyConsistent() {
		open = rs.PrimaryReader
	}
	r, err := open(ctx, rev)
	if err != nil {
		return nil, err
	}
	return s.timed(ctx, r), nil
}

// decodeToken returns the revision of a token this server issued; a token SpiceDB
// issued fails with a *foreignTokenError (wrapping the *zedtoken.ForeignError), any
// other with an *invalidTokenError.
func decodeToken(t *v1.ZedToken) (store.Revision, error) {
	rev, err := zedtoken.Decode(t.GetToken())
	if f, ok := errors.AsType[*zedtoken.ForeignError](err); ok {
		return 0, &foreignTokenError{f}
	}
	if err != nil {
		return 0, &invalidTokenError{err: err}
	}
	return rev, nil
}

func tokenFor(rev store.Revision) *v1.ZedToken {
	return &v1.ZedToken{Token: zedtoken.Encode(rev)}
}

// A paging cursor (ReadRelationships, lookups, export) pins the revision the first page
// was read at (so pages agree with each other) and a hash of the query it was issued for
// (so it cannot resume a different query), around the position to resume after: the
// store's own cursor, or a count of results for lookups.
const cursorVersion = 1

type readCursor struct {
	rev    store.Revision
	filter [8]byte
	after  store.Cursor
}

// queryHash identifies the query a cursor belongs to.
func queryHash(q proto.Message) [8]byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(q)
	sum := sha256.Sum256(b)
	var h [8]byte
	copy(h[:], sum[:])
	return h
}

func encodeCursor(c readCursor) *v1.Cursor {
	buf := []byte{cursorVersion}
	buf = binary.AppendUvarint(buf, uint64(c.rev))
	buf = append(buf, c.filter[:]...)
	buf = append(buf, c.after...)
	return &v1.Cursor{Token: base64.RawURLEncoding.EncodeToString(buf)}
}

// decodeCursor parses a cursor and checks it belongs to query.
func decodeCursor(c *v1.Cursor, query proto.Message) (readCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c.GetToken())
	if err != nil || len(raw) < 1 {
		return readCursor{}, &invalidCursorError{"not a cursor issued by this server"}
	}
	if raw[0] != cursorVersion {
		return readCursor{}, &invalidCursorError{"unsupported cursor version"}
	}
	rev, n := binary.Uvarint(raw[1:])
	if n <= 0 || len(raw) < 1+n+8 {
		return readCursor{}, &invalidCursorError{"truncated cursor"}
	}
	var rc readCursor
	rc.rev = store.Revision(rev)
	copy(rc.filter[:], raw[1+n:1+n+8])
	rc.after = store.Cursor(raw[1+n+8:])
	if rc.filter != queryHash(query) {
		return readCursor{}, &invalidCursorError{"the cursor was issued for a different query"}
	}
	return rc, nil
}
