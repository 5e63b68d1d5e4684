package engine

import (
	"context"
	"errors"

	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

var errUnknownCaveat = errors.New("caveat is not defined in the schema")

// arrow evaluates `tupleset->target` (any) or `tupleset.all(target)` over ids: it reads
// the tupleset relationships of every id at once, then evaluates target on their
// subject objects, one batch per subject type. The subject relation of a tupleset
// relationship is ignored, and subject types without target are skipped, as in SpiceDB.
func (ev *evaluator) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, ids []string, depth int) (results, error) {
	f := store.Filter{ResourceType: def.Name, ResourceIDs: ids, Relation: x.Tupleset}
	byType := map[string][]edge{}
	var types []string
	for item, err := range ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		ev.tr.read(&item.Relationship)
		r := item.Relationship
		t := r.Subject.Object.Type
		if _, ok := byType[t]; !ok {
			types = append(types, t)
		}
		byType[t] = append(byType[t], edge{resource: r.Resource.ID, target: r.Subject.Object.ID, caveat: r.Caveat})
	}
	out := results{}
	if x.ArrowKind == ir.ArrowAll {
		// Every tupleset subject must grant: start each resource that has one at has,
		// then AND in every edge; a resource without edges stays no.
		for _, t := range types {
			for _, e := range byType[t] {
				out.put(e.resource, outHas)
			}
		}
	}
	op := or
	if x.ArrowKind == ir.ArrowAll {
		op = and
	}
	for _, t := range types {
		target := x.TargetOn(ev.s.Definition(t))
		if target == nil {
			if x.ArrowKind == ir.ArrowAll {
				for _, e := range byType[t] {
					out.put(e.resource, outNo)
				}
			}
			continue
		}
		if err := ev.follow(ctx, target, byType[t], depth, out, op); err != nil {
			return nil, err
		}
	}
	return out, nil
}
