package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schemachange"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/validationfile"
)

// bootstrap loads Config.BootstrapFiles (validation files: a schema and relationships)
// into the store at start, as SpiceDB's --datastore-bootstrap-files does: into a store
// that holds no schema yet, or over whatever it holds with BootstrapOverwrite. A store
// that already has a schema is left as it is, so a restart over durable data keeps it.
func (s *Server) bootstrap(ctx context.Context) error {
	if len(s.cfg.BootstrapFiles) == 0 {
		return nil
	}
	var texts []string
	var updates []store.Update
	for _, path := range s.cfg.BootstrapFiles {
		f, err := validationfile.Load(path)
		if err != nil {
			return fmt.Errorf("bootstrap file %s: %w", path, err)
		}
		texts = append(texts, f.Schema)
		for _, r := range f.Relationships {
			updates = append(updates, store.Update{Op: store.Touch, Relationship: r.Relationship})
		}
	}
	compiled, text, err := s.compileForWrite(ctx, strings.Join(texts, "\n\n"))
	if err != nil {
		return fmt.Errorf("bootstrap files' schema: %w", err)
	}
	for _, u := range updates {
		if err := compiled.ValidateRelationship(u.Relationship); err != nil {
			return fmt.Errorf("bootstrap files: relationship %s: %w", rel.String(u.Relationship), err)
		}
	}
	empty, err := s.holdsNoSchema(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if !empty && !s.cfg.BootstrapOverwrite {
		s.cfg.Logger.Info("bootstrap files not loaded: the datastore already holds a schema (--datastore-bootstrap-overwrite replaces it)")
		return nil
	}
	if !empty {
		if _, _, _, err := s.store.DeleteByFilter(ctx, nil, store.Filter{}, 0, false); err != nil {
			return fmt.Errorf("bootstrap: deleting the stored relationships: %w", err)
		}
	}
	if _, err := s.store.WriteSchema(ctx, text, func(ctx context.Context, r store.Reader) error {
		old, err := s.schemas.at(ctx, r)
		if err != nil {
			return err
		}
		return schemachange.Check(ctx, r, old, compiled)
	}); err != nil {
		return fmt.Errorf("bootstrap: writing the schema: %w", err)
	}
	for len(updates) > 0 {
		n := min(len(updates), s.cfg.MaxUpdatesPerWrite)
		if _, err := s.store.Write(ctx, nil, updates[:n], nil); err != nil {
			return fmt.Errorf("bootstrap: writing relationships: %w", err)
		}
		updates = updates[n:]
	}
	s.cfg.Logger.Info("loaded the bootstrap files", "files", s.cfg.BootstrapFiles, "definitions", len(compiled.Definitions))
	return nil
}

// holdsNoSchema reports whether the store's head has no schema.
func (s *Server) holdsNoSchema(ctx context.Context) (bool, error) {
	rev, err := s.store.HeadRevision(ctx)
	if err != nil {
		return false, err
	}
	r, err := s.store.Reader(ctx, rev)
	if err != nil {
		return false, err
	}
	sch, err := s.schemas.at(ctx, r)
	if err != nil {
		return false, err
	}
	return len(sch.Definitions) == 0 && len(sch.Caveats) == 0, nil
}
