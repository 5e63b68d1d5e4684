package server

import (
	"context"
	"errors"
	"io"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// defaultExportBatch is how many relationships one export message carries when the
// request sets no optional_limit.
const defaultExportBatch = 1000

// ImportBulkRelationships creates every relationship the client streams, in one
// transaction: if any already exists or is invalid, nothing is written.
func (p *permissionsService) ImportBulkRelationships(stream v1.PermissionsService_ImportBulkRelationshipsServer) error {
	n, err := p.s.importRelationships(stream)
	if err != nil {
		return p.s.status(err)
	}
	return stream.SendAndClose(&v1.ImportBulkRelationshipsResponse{NumLoaded: n})
}

// importRelationships receives the stream's import messages until its end and
// creates every relationship as one revision: the store's bulk load takes them as they
// arrive, each checked against the newest schema, so an import is not held in memory.
// A bulk load takes no validator, so a schema write landing meanwhile could admit
// relationships the new schema no longer allows: a narrow window that Write's
// in-transaction validation does not have, accepted for a load that is several times
// faster and needs no memory for the whole import.
func (s *Server) importRelationships(stream grpc.ServerStream) (uint64, error) {
	ctx := stream.Context()
	_, sch, err := s.readerAndSchema(ctx, headConsistency)
	if err != nil {
		return 0, err
	}
	var raw rawMessage
	next, stop := prefetch(func() ([]rel.Relationship, error) { return s.recvImport(stream, &raw) })
	defer stop()
	var n uint64
	_, err = s.store.BulkLoad(ctx, func(yield func(rel.Relationship, error) bool) {
		for {
			batch, recvErr := next()
			if errors.Is(recvErr, io.EOF) {
				return
			}
			for _, r := range batch {
				if err := sch.ValidateRelationship(r); err != nil {
					yield(rel.Relationship{}, err)
					return
				}
				if !yield(r, nil) {
					return
				}
				n++
			}
			if recvErr != nil {
				yield(rel.Relationship{}, recvErr)
				return
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// prefetchDepth is how many messages prefetch may hold decoded. With one, the load
// waited whenever a message arrived late: 8 made imports 10% faster.
const prefetchDepth = 8

// prefetch calls next ahead of its caller, up to prefetchDepth calls, in a goroutine
// of its own, so that the store loads one message while the next are received and
// decoded. stop ends the goroutine once it returns from the call in progress, which
// the end of the stream (or of the handler, which ends the stream) makes sure of.
func prefetch(next func() ([]rel.Relationship, error)) (prefetched func() ([]rel.Relationship, error), stop func()) {
	type received struct {
		batch []rel.Relationship
		err   error
	}
	ch := make(chan received, prefetchDepth)
	done := make(chan struct{})
	go func() {
		for {
			batch, err := next()
			select {
			case ch <- received{batch, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return func() ([]rel.Relationship, error) {
		r := <-ch
		return r.batch, r.err
	}, func() { close(done) }
}

// ExportBulkRelationships streams every relationship matching the optional filter, in
// batches, all at one revision; each batch's cursor resumes after it.
func (p *permissionsService) ExportBulkRelationships(req *v1.ExportBulkRelationshipsRequest, stream v1.PermissionsService_ExportBulkRelationshipsServer) error {
	if err := p.s.exportRelationships(stream.Context(), req, stream.Send); err != nil {
		return p.s.status(err)
	}
	return nil
}

func (s *Server) exportRelationships(ctx context.Context, req *v1.ExportBulkRelationshipsRequest, send func(*v1.ExportBulkRelationshipsResponse) error) error {
	filter := req.GetOptionalRelationshipFilter()
	var r store.Reader
	var after store.Cursor
	var err error
	if c := req.GetOptionalCursor(); c != nil {
		var rc readCursor
		if rc, err = decodeCursor(c, filter); err != nil {
			return err
		}
		after = rc.after
		r, err = s.store.Reader(ctx, rc.rev)
	} else {
		r, err = s.readerFor(ctx, req.GetConsistency())
	}
	if err != nil {
		return err
	}
	f := filterFromV1(filter)
	if filter != nil {
		sch, err := s.schemas.at(ctx, r)
		if err != nil {
			return err
		}
		if err := validateFilter(sch, f); err != nil {
			return err
		}
	}
	size := int(req.GetOptionalLimit())
	if size == 0 {
		size = defaultExportBatch
	}
	fh := queryHash(filter)
	batch := make([]*v1.Relationship, 0, size)
	var last store.Cursor
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		resp := &v1.ExportBulkRelationshipsResponse{AfterResultCursor: encodeCursor(readCursor{r.Revision(), fh, last}), Relationships: batch}
		batch = make([]*v1.Relationship, 0, size)
		return send(resp)
	}
	for item, err := range r.Query(ctx, f, store.QueryOptions{After: after}) {
		if err != nil {
			return err
		}
		wire, err := relationshipToV1(item.Relationship)
		if err != nil {
			return err
		}
		batch, last = append(batch, wire), item.Cursor()
		if len(batch) == size {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
