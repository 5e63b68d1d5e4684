package permdata

import (
	"context"
	"slices"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// LookupEntities lists the ids of the entities Permify's lookup-entity returns: those
// the engine answers HasPermission for (a conditional answer is a denial, as in Result).
func LookupEntities(ctx context.Context, e *engine.Engine, s *Schema, r store.Reader, req engine.LookupResourcesRequest) ([]string, error) {
	var ids []string
	err := EachEntity(ctx, e, s, r, req, func(id string) error {
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// EachEntity passes yield the id of each entity LookupEntities lists, as the engine
// proves it; with req.Ordered, in ascending id order after req.After. yield returning
// an error stops the lookup with that error.
func EachEntity(ctx context.Context, e *engine.Engine, s *Schema, r store.Reader, req engine.LookupResourcesRequest, yield func(id string) error) error {
	return e.LookupResources(ctx, s.IR, r, req, func(f engine.FoundResource) error {
		if f.Result.Membership != engine.HasPermission {
			return nil
		}
		return yield(f.ID)
	})
}

// LookupSubjects lists the subject ids Permify's lookup-subject returns: those the
// engine answers HasPermission for (a conditional answer is a denial, as in Result).
// A wildcard grant (a public attribute, a rule that holds for the entity, a `type:*`
// relationship) is expanded as Permify expands it: into every subject of the
// requested type and relation that some relationship at r names, less the wildcard's
// exclusions; "*" itself is never returned.
func LookupSubjects(ctx context.Context, e *engine.Engine, s *Schema, r store.Reader, req engine.LookupSubjectsRequest) ([]string, error) {
	var ids []string
	var wildcard *engine.FoundSubject
	err := e.LookupSubjects(ctx, s.IR, r, req, func(f engine.FoundSubject) error {
		switch {
		case f.Result.Membership != engine.HasPermission:
		case f.ID == rel.Wildcard:
			wildcard = &f
		default:
			ids = append(ids, f.ID)
		}
		return nil
	})
	if err != nil || wildcard == nil {
		return ids, err
	}
	excluded := map[string]bool{}
	for _, x := range wildcard.Excluded {
		excluded[x.ID] = true
	}
	known, err := knownSubjects(ctx, r, req.SubjectType, req.SubjectRelation)
	if err != nil {
		return nil, err
	}
	for _, id := range known {
		if !excluded[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// knownSubjects lists the ids of the subjects of type typ and relation relation that
// relationships at r name, wildcards aside, once for each relationship.
func knownSubjects(ctx context.Context, r store.Reader, typ, relation string) ([]string, error) {
	var ids []string
	f := store.Filter{Subject: &store.SubjectFilter{Type: typ, Relation: relation, RelationSet: true}}
	for it, err := range r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		if id := it.Relationship.Subject.Object.ID; id != rel.Wildcard {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
