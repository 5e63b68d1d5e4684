package server

import (
	"context"
	"errors"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// WriteRelationships applies the updates atomically. Everything that can be checked
// without the schema is checked first; the rest runs inside the store's transaction
// against the schema in force there, so a concurrent schema write cannot slip between
// validation and commit.
func (p *permissionsService) WriteRelationships(ctx context.Context, req *v1.WriteRelationshipsRequest) (*v1.WriteRelationshipsResponse, error) {
	cfg := p.s.cfg
	if n := len(req.GetUpdates()); n > cfg.MaxUpdatesPerWrite {
		return nil, p.s.status(&tooManyError{tooManyUpdates, n, cfg.MaxUpdatesPerWrite})
	}
	if n := len(req.GetOptionalPreconditions()); n > cfg.MaxPreconditions {
		return nil, p.s.status(&tooManyError{tooManyPreconditions, n, cfg.MaxPreconditions})
	}
	preconds, err := preconditionsFromV1(req.GetOptionalPreconditions())
	if err != nil {
		return nil, p.s.status(err)
	}
	updates, err := p.s.updatesFromV1(req.GetUpdates())
	if err != nil {
		return nil, p.s.status(err)
	}
	rev, err := p.s.store.Write(ctx, preconds, updates, p.s.writeValidator(preconds, updates))
	if err != nil {
		return nil, p.s.status(err)
	}
	return &v1.WriteRelationshipsResponse{WrittenAt: tokenFor(rev)}, nil
}

// updatesFromV1 converts updates and runs the checks that need no schema: duplicates,
// context size and relationship syntax.
func (s *Server) updatesFromV1(in []*v1.RelationshipUpdate) ([]store.Update, error) {
	out := make([]store.Update, 0, len(in))
	seen := make(map[rel.Key]struct{}, len(in))
	for _, u := range in {
		r, err := s.relationshipFromWire(u.GetRelationship())
		if err != nil {
			return nil, err
		}
		if _, dup := seen[r.Key()]; dup {
			return nil, &duplicateUpdateError{r}
		}
		seen[r.Key()] = struct{}{}
		out = append(out, store.Update{Op: updateOpFromV1(u.GetOperation()), Relationship: r})
	}
	return out, nil
}

// relationshipFromWire converts a relationship and checks what needs no schema: its
// context size and its syntax.
func (s *Server) relationshipFromWire(w *v1.Relationship) (rel.Relationship, error) {
	r := relv1.FromRelationship(w)
	if size := contextSize(w); size > s.cfg.MaxRelationshipContextBytes {
		return r, &contextTooLargeError{r, size, s.cfg.MaxRelationshipContextBytes}
	}
	if err := rel.Validate(r); err != nil {
		return r, &malformedRelationshipError{err}
	}
	return r, nil
}

func (s *Server) writeValidator(preconds []store.Precondition, updates []store.Update) store.Validator {
	return func(ctx context.Context, r store.Reader) error {
		sch, err := s.schemas.at(ctx, r)
		if err != nil {
			return err
		}
		for _, p := range preconds {
			if err := validateFilter(sch, p.Filter); err != nil {
				return err
			}
		}
		for _, u := range updates {
			if err := validateUpdate(sch, u); err != nil {
				return err
			}
		}
		return nil
	}
}

// validateUpdate checks one update against the schema (names, allowed subject types,
// caveat and its context). A delete only needs its relation to exist: deleting a
// relationship the schema no longer allows must work, or it could never be cleaned up.
func validateUpdate(sch *ir.Schema, u store.Update) error {
	if u.Op == store.Delete {
		return validateRelationExists(sch, u.Relationship)
	}
	return sch.ValidateRelationship(u.Relationship)
}

// DeleteRelationships deletes what the filter matches, transactionally up to the limit.
func (p *permissionsService) DeleteRelationships(ctx context.Context, req *v1.DeleteRelationshipsRequest) (*v1.DeleteRelationshipsResponse, error) {
	cfg := p.s.cfg
	if n := len(req.GetOptionalPreconditions()); n > cfg.MaxPreconditions {
		return nil, p.s.status(&tooManyError{tooManyPreconditions, n, cfg.MaxPreconditions})
	}
	if req.GetOptionalCursor() != nil {
		return nil, p.s.status(&unsupportedError{"cursored deletion (optional_cursor)"})
	}
	if limit := int(req.GetOptionalLimit()); limit > cfg.MaxDeleteLimit {
		return nil, p.s.status(&limitTooLargeError{limit, cfg.MaxDeleteLimit})
	}
	if err := p.s.checkFilterAtHead(ctx, req.GetRelationshipFilter(), req.GetOptionalPreconditions()); err != nil {
		return nil, p.s.status(err)
	}
	preconds, err := preconditionsFromV1(req.GetOptionalPreconditions())
	if err != nil {
		return nil, p.s.status(err)
	}
	f := filterFromV1(req.GetRelationshipFilter())
	rev, deleted, more, err := p.s.store.DeleteByFilter(ctx, preconds, f, int(req.GetOptionalLimit()), req.GetOptionalAllowPartialDeletions())
	if errors.Is(err, store.ErrTooManyToDelete) {
		err = &tooManyToDeleteError{req.GetRelationshipFilter(), int(req.GetOptionalLimit())}
	}
	if err != nil {
		return nil, p.s.status(err)
	}
	progress := v1.DeleteRelationshipsResponse_DELETION_PROGRESS_COMPLETE
	if more {
		progress = v1.DeleteRelationshipsResponse_DELETION_PROGRESS_PARTIAL
	}
	return &v1.DeleteRelationshipsResponse{
		DeletedAt:                 tokenFor(rev),
		DeletionProgress:          progress,
		RelationshipsDeletedCount: uint64(deleted),
	}, nil
}

// checkFilterAtHead validates a delete's filters against the current schema. The
// store's DeleteByFilter has no validator hook; a schema write racing a delete can
// only remove definitions that have no relationships, so the race deletes nothing wrong.
func (s *Server) checkFilterAtHead(ctx context.Context, f *v1.RelationshipFilter, preconds []*v1.Precondition) error {
	if err := filterShapeError(f); err != nil {
		return err
	}
	_, sch, err := s.readerAndSchema(ctx, headConsistency)
	if err != nil {
		return err
	}
	if err := validateFilter(sch, filterFromV1(f)); err != nil {
		return err
	}
	for _, p := range preconds {
		if err := validateFilter(sch, filterFromV1(p.GetFilter())); err != nil {
			return err
		}
	}
	return nil
}

// ReadRelationships streams the relationships matching a filter, each with a cursor
// that resumes after it at the same revision.
func (p *permissionsService) ReadRelationships(req *v1.ReadRelationshipsRequest, stream v1.PermissionsService_ReadRelationshipsServer) error {
	ctx := stream.Context()
	limit := int(req.GetOptionalLimit())
	if limit > p.s.cfg.ReadRelationshipsLimit {
		return p.s.status(&limitTooLargeError{limit, p.s.cfg.ReadRelationshipsLimit})
	}
	r, after, err := p.s.readStart(ctx, req)
	if err != nil {
		return p.s.status(err)
	}
	sch, err := p.s.schemas.at(ctx, r)
	if err != nil {
		return p.s.status(err)
	}
	f := filterFromV1(req.GetRelationshipFilter())
	if err := validateFilter(sch, f); err != nil {
		return p.s.status(err)
	}
	readAt, fh := tokenFor(r.Revision()), queryHash(req.GetRelationshipFilter())
	for item, err := range r.Query(ctx, f, store.QueryOptions{Limit: limit, After: after}) {
		if err != nil {
			return p.s.status(err)
		}
		v1rel, err := relationshipToV1(item.Relationship)
		if err != nil {
			return p.s.status(err)
		}
		resp := &v1.ReadRelationshipsResponse{
			ReadAt:            readAt,
			Relationship:      v1rel,
			AfterResultCursor: encodeCursor(readCursor{r.Revision(), fh, item.Cursor()}),
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

// filterShapeError refuses a filter SpiceDB refuses before reading anything: an
// empty one, or one that gives both a resource id and a resource id prefix.
func filterShapeError(f *v1.RelationshipFilter) error {
	switch {
	case filterIsEmpty(f):
		return &invalidFilterError{f.String(), "at least one field must be set"}
	case f.GetOptionalResourceId() != "" && f.GetOptionalResourceIdPrefix() != "":
		return &invalidFilterError{f.String(), "resource_id and resource_id_prefix cannot be set at the same time"}
	}
	return nil
}

// readStart opens the reader a read runs at: the cursor's revision when resuming,
// else the one the consistency asks for.
func (s *Server) readStart(ctx context.Context, req *v1.ReadRelationshipsRequest) (store.Reader, store.Cursor, error) {
	if err := filterShapeError(req.GetRelationshipFilter()); err != nil {
		return nil, "", err
	}
	if c := req.GetOptionalCursor(); c != nil {
		rc, err := decodeCursor(c, req.GetRelationshipFilter())
		if err != nil {
			return nil, "", err
		}
		r, err := s.store.Reader(ctx, rc.rev)
		return r, rc.after, err
	}
	r, err := s.readerFor(ctx, req.GetConsistency())
	return r, "", err
}

// validateFilter checks that the types and relations a filter names exist, so a typo
// is an error rather than an empty result.
func validateFilter(sch *ir.Schema, f store.Filter) error {
	if f.ResourceType != "" {
		def := sch.Definition(f.ResourceType)
		if def == nil {
			return sch.UnknownDefinition(f.ResourceType)
		}
		if f.Relation != "" && def.Relation(f.Relation) == nil {
			return &ir.UnknownRelationError{Definition: f.ResourceType, Name: f.Relation}
		}
	}
	if sf := f.Subject; sf != nil && sf.Type != "" {
		def := sch.Definition(sf.Type)
		if def == nil {
			return sch.UnknownDefinition(sf.Type)
		}
		if sf.RelationSet && sf.Relation != "" && def.Relation(sf.Relation) == nil {
			return &ir.UnknownRelationError{Definition: sf.Type, Name: sf.Relation}
		}
	}
	return nil
}

// validateRelationExists checks the definition and relation of a relationship being
// deleted.
func validateRelationExists(sch *ir.Schema, r rel.Relationship) error {
	return validateFilter(sch, store.Filter{ResourceType: r.Resource.Type, Relation: r.Relation})
}
