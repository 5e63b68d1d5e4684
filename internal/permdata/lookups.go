package permdata

import (
	"context"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// LookupEntities lists the ids of the entities Permify's lookup-entity returns: those
// the engine answers HasPermission for (a conditional answer is a denial, as in Result).
func LookupEntities(ctx context.Context, e *engine.Engine, s *Schema, r store.Reader, req engine.LookupResourcesRequest) ([]string, error) {
	var ids []string
	err := e.LookupResources(ctx, s.IR, r, req, func(f engine.FoundResource) error {
		if f.Result.Membership == engine.HasPermission {
			ids = append(ids, f.ID)
		}
		return nil
	})
	return ids, err
}

// LookupSubjects lists the concrete subject ids Permify's lookup-subject returns; a
// wildcard grant (a public attribute) is not expanded into every known subject.
func LookupSubjects(ctx context.Context, e *engine.Engine, s *Schema, r store.Reader, req engine.LookupSubjectsRequest) ([]string, error) {
	var ids []string
	err := e.LookupSubjects(ctx, s.IR, r, req, func(f engine.FoundSubject) error {
		if f.Result.Membership == engine.HasPermission && f.ID != rel.Wildcard {
			ids = append(ids, f.ID)
		}
		return nil
	})
	return ids, err
}
