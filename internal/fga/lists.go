package fga

import (
	"context"
	"errors"
	"slices"

	"github.com/latch-authz/latch/internal/engine"
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
// yielded once, without OpenFGA's truncation; yield returning an error stops it with
// that error. It decides as OpenFGA v1.22.1 does, by its pipeline where that applies
// (pipelineObjects), else by its reverse expansion (reverseExpandObjects), whole
// before the first object is yielded: a condition lacking a parameter on a tuple
// either reads fails it with an engine.MissingParamsError.
func StreamObjects(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, req engine.LookupResourcesRequest, yield func(id string) error) error {
	ids, err := pipelineObjects(ctx, m, r, req.ResourceType, req.Permission, req.Subject, req.Context)
	if errors.Is(err, errNoPipeline) {
		ids, err = reverseExpandObjects(ctx, e, m, r, req)
	}
	for _, id := range ids {
		if err == nil {
			err = yield(id)
		}
	}
	return err
}

func missingError(missing []string) error {
	slices.Sort(missing)
	return &engine.MissingParamsError{Missing: slices.Compact(missing)}
}
