package engine

import (
	"context"
	"errors"
	"slices"

	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

var errUnknownCaveat = errors.New("caveat is not defined in the schema")

// arrow evaluates `tupleset->target` (any) or `tupleset.all(target)` over ids: it reads
// the tupleset relationships of every id at once (hops), then evaluates target on their
// subject objects, one batch per subject type. The subject relation of a tupleset
// relationship is ignored, and subject types without target are skipped, as in SpiceDB.
func (ev *evaluator) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, ids []string, depth int) (results, error) {
	if plan, ok := ev.recursiveArrow(x); ok {
		out := results{}
		return out, ev.followRecursive(ctx, x.TuplesetRel, x.TuplesetRel.Allowed, plan, ids, depth, out)
	}
	if err := ev.hops(ctx, def, x.Tupleset, ids); err != nil {
		return nil, err
	}
	var all []edge
	if len(ids) == 1 {
		all = ev.tuplesets[tuplesetKey{def, x.Tupleset, ids[0]}]
	} else {
		for _, id := range ids {
			all = append(all, ev.tuplesets[tuplesetKey{def, x.Tupleset, id}]...)
		}
	}
	if reads := ev.weight2Arrow(x); reads != nil {
		return ev.arrowFromSubject(ctx, all, reads)
	}
	out := results{}
	for _, e := range all {
		ev.tr.read(e.expires)
		if x.ArrowKind == ir.ArrowAll {
			// Every tupleset subject must grant: start each resource that has one at
			// has, then AND in every edge; a resource without edges stays no.
			out.put(e.resource, outHas)
		}
	}
	op := or
	if x.ArrowKind == ir.ArrowAll {
		op = and
	}
	// One batch per subject type, in the order the types first appear.
	for len(all) > 0 {
		t := all[0].typ
		batch, rest := all, []edge(nil)
		if slices.ContainsFunc(all, func(e edge) bool { return e.typ != t }) {
			batch = nil
			for _, e := range all {
				if e.typ == t {
					batch = append(batch, e)
				} else {
					rest = append(rest, e)
				}
			}
		}
		all = rest
		target := x.TargetOn(ev.s.Definition(t))
		if target == nil {
			if x.ArrowKind == ir.ArrowAll {
				for _, e := range batch {
					out.put(e.resource, outNo)
				}
			}
			continue
		}
		if err := ev.follow(ctx, target, batch, depth, out, op); err != nil {
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

// hops reads the relationships of relation on each of ids that the request has not
// read yet, into ev.tuplesets. Arrows over one tupleset (`owner->view + owner->edit`,
// or the same arrow in both halves of an exclusion) read it once per request.
func (ev *evaluator) hops(ctx context.Context, def *ir.Definition, relation string, ids []string) error {
	if ev.tuplesets == nil {
		ev.tuplesets = map[tuplesetKey][]edge{}
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
	ev.visit = readVisitor{ev: ev, kind: readTupleset, tupleset: tuplesetKey{def: def, relation: relation}}
	err := store.Each(ctx, ev.r, f, store.QueryOptions{}, &ev.visit)
	ev.visit = readVisitor{}
	if err != nil {
		for _, id := range unread {
			delete(ev.tuplesets, tuplesetKey{def, relation, id})
		}
	}
	return err
}
