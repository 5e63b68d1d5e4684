package fga

import (
	"context"
	"errors"
	"slices"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// ListObjects answers OpenFGA's ListObjects with e (an engine with OpenFGA's
// semantics) on r (from m.Reader): the ids of the objects of req.ResourceType on
// which req.Subject has req.Permission, sorted. A result that depends on condition
// parameters the request lacks is an engine.MissingParamsError.
func ListObjects(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, req engine.LookupResourcesRequest) ([]string, error) {
	var ids []string
	err := StreamObjects(ctx, e, m, r, req, func(id string) error {
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// StreamObjects is ListObjects streamed (StreamedListObjects): each object is
// yielded once, as found, without OpenFGA's truncation; yield returning an error
// stops it with that error. A result that depends on condition parameters the
// request lacks stops it with an engine.MissingParamsError.
//
// Where OpenFGA answers by its ListObjects pipeline (pipelineObjects), so does this,
// whole before the first object is yielded. Elsewhere the engine looks the objects
// up; its lookup may refuse data it cannot follow within the depth limit, which
// OpenFGA resolves; then every object of the type in the store not yet yielded is
// checked instead, each check resolving cycles as OpenFGA does.
func StreamObjects(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, req engine.LookupResourcesRequest, yield func(id string) error) error {
	ids, err := pipelineObjects(ctx, m, r, req.ResourceType, req.Permission, req.Subject, req.Context)
	if !errors.Is(err, errNoPipeline) {
		for _, id := range ids {
			if err == nil {
				err = yield(id)
			}
		}
		return err
	}
	sent := map[string]bool{}
	err = e.LookupResources(ctx, m.Schema, r, req, func(f engine.FoundResource) error {
		if f.Result.Membership == engine.Conditional {
			return missingError(f.Result.Missing)
		}
		if sent[f.ID] {
			return nil
		}
		sent[f.ID] = true
		return yield(f.ID)
	})
	if !errors.Is(err, engine.ErrMaxDepth) {
		return err
	}
	cands, err := objectsOf(ctx, r, req.ResourceType)
	if err != nil {
		return err
	}
	cands = slices.DeleteFunc(cands, func(id string) bool { return sent[id] })
	checks := make([]engine.CheckRequest, len(cands))
	for i, id := range cands {
		checks[i] = engine.CheckRequest{Resource: rel.ObjectRef{Type: req.ResourceType, ID: id}, Permission: req.Permission, Subject: req.Subject, Context: req.Context}
	}
	for i, res := range e.CheckBulk(ctx, m.Schema, r, checks) {
		if res.Err != nil {
			return res.Err
		}
		ok, err := Allowed(res.Result)
		if err != nil {
			return err
		}
		if ok {
			if err := yield(cands[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// objectsOf returns, sorted, the ids of the objects of typ that some tuple names, as
// its object or its user (wildcards aside).
func objectsOf(ctx context.Context, r store.Reader, typ string) ([]string, error) {
	var ids []string
	for _, f := range []store.Filter{{ResourceType: typ}, {Subject: &store.SubjectFilter{Type: typ}}} {
		for item, err := range r.Query(ctx, f, store.QueryOptions{}) {
			if err != nil {
				return nil, err
			}
			x := item.Relationship
			if f.Subject == nil {
				ids = append(ids, x.Resource.ID)
			} else if x.Subject.Object.ID != rel.Wildcard {
				ids = append(ids, x.Subject.Object.ID)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func missingError(missing []string) error {
	slices.Sort(missing)
	return &engine.MissingParamsError{Missing: slices.Compact(missing)}
}
