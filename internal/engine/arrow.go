package engine

import (
	"context"
	"errors"
	"time"

	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

var errUnknownCaveat = errors.New("caveat is not defined in the schema")

// arrow evaluates `tupleset->target` (any) or `tupleset.all(target)` over ids: it reads
// the tupleset relationships of every id at once (hops), then evaluates target on their
// subject objects, one batch per subject type. The subject relation of a tupleset
// relationship is ignored, and subject types without target are skipped, as in SpiceDB.
func (ev *evaluator) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, ids []string, depth int) (results, error) {
	if err := ev.hops(ctx, def, x.Tupleset, ids); err != nil {
		return nil, err
	}
	byType := map[string][]edge{}
	var types []string
	for _, id := range ids {
		for _, h := range ev.tuplesets[tuplesetKey{def, x.Tupleset, id}] {
			ev.tr.read(h.expires)
			if _, ok := byType[h.typ]; !ok {
				types = append(types, h.typ)
			}
			byType[h.typ] = append(byType[h.typ], h.edge)
		}
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

// tuplesetKey names the relationships of one relation of one resource that an arrow
// walks.
type tuplesetKey struct {
	def      *ir.Definition
	relation string
	id       string
}

// hop is one tupleset relationship: its edge, the type of the object it points to and
// when it expires (nil: never).
type hop struct {
	edge
	typ     string
	expires *time.Time
}

// hops reads the relationships of relation on each of ids that the request has not
// read yet, into ev.tuplesets. Arrows over one tupleset (`owner->view + owner->edit`,
// or the same arrow in both halves of an exclusion) read it once per request.
func (ev *evaluator) hops(ctx context.Context, def *ir.Definition, relation string, ids []string) error {
	if ev.tuplesets == nil {
		ev.tuplesets = map[tuplesetKey][]hop{}
	}
	var unread []string
	for _, id := range ids {
		if _, ok := ev.tuplesets[tuplesetKey{def, relation, id}]; !ok {
			unread = append(unread, id)
		}
	}
	if len(unread) == 0 {
		return nil
	}
	for _, id := range unread {
		ev.tuplesets[tuplesetKey{def, relation, id}] = nil
	}
	f := store.Filter{ResourceType: def.Name, ResourceIDs: unread, Relation: relation}
	for item, err := range ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			for _, id := range unread {
				delete(ev.tuplesets, tuplesetKey{def, relation, id})
			}
			return err
		}
		r := &item.Relationship
		k := tuplesetKey{def, relation, r.Resource.ID}
		ev.tuplesets[k] = append(ev.tuplesets[k], hop{
			edge:    edge{resource: r.Resource.ID, target: r.Subject.Object.ID, caveat: r.Caveat},
			typ:     r.Subject.Object.Type,
			expires: r.Expiration,
		})
	}
	return nil
}
