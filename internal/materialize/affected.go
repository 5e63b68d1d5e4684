package materialize

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// Affected is what one committed revision may have changed of the computed
// permissions of the watched targets: for each, the resources whose permission it
// may have changed (every other resource's is the same before and at Revision).
// Checkpoint: nothing changed up to Revision.
type Affected struct {
	Revision, Before store.Revision
	Checkpoint       bool
	Resources        map[Target][]string
}

// BreakingError: a schema change changed what a watched target is made of, so that
// computed permissions may change with no relationship changing.
type BreakingError struct {
	Revision store.Revision
	Targets  []Target
}

func (e *BreakingError) Error() string {
	return fmt.Sprintf("a schema change at revision %d changed what %v are made of: read the permissions again at that revision and watch from it", e.Revision, e.Targets)
}

// WatchAffected yields, for each revision committed after after, the resources of
// each target whose permission it may have changed: the resources whose target set
// reaches, before or at the revision (through any relationship, caveated ones
// included), a set one of its relationships names. Targets must be configured.
func (p *PermissionSets) WatchAffected(ctx context.Context, w store.Watcher, after store.Revision, checkpoints time.Duration, targets []Target) iter.Seq2[Affected, error] {
	return func(yield func(Affected, error) bool) {
		g, _, err := p.graphAt(ctx, after)
		if err != nil {
			yield(Affected{}, historyErr(err))
			return
		}
		prev := after
		for ch, err := range w.Watch(ctx, after, store.WatchOptions{CheckpointInterval: checkpoints}) {
			if err != nil {
				yield(Affected{}, historyErr(err))
				return
			}
			rev := ch.Revision
			if ch.Checkpoint {
				prev = rev
				if !yield(Affected{Revision: rev, Before: rev, Checkpoint: true}, nil) {
					return
				}
				continue
			}
			if ch.SchemaChanged {
				ng, _, err := p.graphAt(ctx, rev)
				if err != nil {
					yield(Affected{}, historyErr(err))
					return
				}
				var broken []Target
				for _, t := range targets {
					if g.targetSig(t) != ng.targetSig(t) {
						broken = append(broken, t)
					}
				}
				if len(broken) > 0 {
					yield(Affected{}, &BreakingError{rev, broken})
					return
				}
				g = ng
			}
			var cands []Pair
			for i := range ch.Updates {
				cands = g.pairsOf(cands, &ch.Updates[i].Relationship)
			}
			a := Affected{Revision: rev, Before: prev, Resources: map[Target][]string{}}
			if len(cands) > 0 {
				for _, at := range []store.Revision{prev, rev} {
					r, err := p.store.Reader(ctx, at)
					if err != nil {
						yield(Affected{}, historyErr(err))
						return
					}
					if err := g.above(ctx, r, cands, targets, a.Resources); err != nil {
						yield(Affected{}, historyErr(err))
						return
					}
				}
				for t, ids := range a.Resources {
					slices.Sort(ids)
					a.Resources[t] = slices.Compact(ids)
				}
			}
			prev = rev
			if !yield(a, nil) {
				return
			}
		}
	}
}

// above adds to out the ids of the targets' sets that reach, at r, the set of a pair
// of cands (the set itself included).
func (g *setGraph) above(ctx context.Context, r store.Reader, cands []Pair, targets []Target, out map[Target][]string) error {
	seen := map[SetRef]bool{}
	var queue []SetRef
	for _, c := range cands {
		if !seen[c.Set] {
			seen[c.Set] = true
			queue = append(queue, c.Set)
		}
	}
	for i := 0; i < len(queue); i++ {
		s := queue[i]
		for _, t := range targets {
			if s.Type == t.Resource && s.Relation == t.Permission {
				out[t] = append(out[t], s.ID)
			}
		}
		for k, cs := range g.byRel {
			for _, c := range cs {
				sf := &store.SubjectFilter{Type: s.Type, IDs: []string{s.ID}}
				if c.arrow == "" {
					sf.Relation, sf.RelationSet = s.Relation, true
				} else if c.arrow != s.Relation {
					continue
				}
				f := store.Filter{ResourceType: k.def, Relation: k.rel, Subject: sf}
				for item, err := range r.Query(ctx, f, store.QueryOptions{}) {
					if err != nil {
						return err
					}
					up := SetRef{k.def, item.Relationship.Resource.ID, c.set}
					if !seen[up] {
						seen[up] = true
						queue = append(queue, up)
					}
				}
			}
		}
	}
	return nil
}
