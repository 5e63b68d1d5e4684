package materialize

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// PermissionSets answers the Materialize API's permission-set questions (the whole
// sets at a revision, and their changes in revision order) from the store itself:
// a lookup reads the relationships of the sets' types at its revision, with the
// child sets below each set (the closure, closure.go), and each committed revision's
// changes are the pairs its relationships name whose presence differs between a read
// before it and a read at it, with the closure's pairs the child sets that moved
// add or remove. Every answer is exact at its
// revision, needs no memory beyond a page, and is the same on every node of a
// cluster; how far back a revision may be is the store's history (its GC window).
type PermissionSets struct {
	store    store.Store
	schemaAt func(ctx context.Context, rev store.Revision) (*ir.Schema, error)
	targets  []Target

	mu     sync.Mutex
	last   *ir.Schema // the schema graph was built for
	graph  *setGraph
	broken []*TargetError
}

// NewPermissionSets answers for st, with the schema in force at each revision from
// schemaAt, the index's recursive relations and targets.
func NewPermissionSets(st store.Store, schemaAt func(ctx context.Context, rev store.Revision) (*ir.Schema, error), targets []Target) *PermissionSets {
	return &PermissionSets{store: st, schemaAt: schemaAt, targets: slices.Clone(targets)}
}

// Targets returns the configured targets.
func (p *PermissionSets) Targets() []Target { return slices.Clone(p.targets) }

// Configured reports whether t is a configured target.
func (p *PermissionSets) Configured(t Target) bool { return slices.Contains(p.targets, t) }

// graphAt returns the graph of the schema in force at rev, with the targets it
// cannot stream.
func (p *PermissionSets) graphAt(ctx context.Context, rev store.Revision) (*setGraph, []*TargetError, error) {
	s, err := p.schemaAt(ctx, rev)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.graph == nil || p.last != s {
		p.graph, p.broken = newSetGraph(s, p.targets)
		p.last = s
	}
	return p.graph, p.broken, nil
}

// Check returns the first configured target the schema at rev cannot stream.
func (p *PermissionSets) Check(ctx context.Context, rev store.Revision) error {
	_, bad, err := p.graphAt(ctx, rev)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return bad[0]
	}
	return nil
}

// Signature returns what the sets are made of at rev, written out: a lookup's
// positions hold only among revisions of equal signatures.
func (p *PermissionSets) Signature(ctx context.Context, rev store.Revision) (string, error) {
	g, _, err := p.graphAt(ctx, rev)
	if err != nil {
		return "", err
	}
	return g.sig, nil
}

// LookupPosition is where a lookup resumes: in the TypeIndex-th resource type of the
// sets, after the relationship After (from the start of the type when empty), having
// already sent the first Skip pairs of the object that follows.
type LookupPosition struct {
	TypeIndex int
	After     store.Cursor
	Skip      int
}

// Lookup yields the permission sets at rev from pos, pair by pair, sorted by set and
// child, each with the position that resumes after it, until yield returns false.
func (p *PermissionSets) Lookup(ctx context.Context, rev store.Revision, pos LookupPosition, yield func(Pair, LookupPosition) bool) error {
	g, bad, err := p.graphAt(ctx, rev)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return bad[0]
	}
	r, err := p.store.Reader(ctx, rev)
	if err != nil {
		return historyErr(err)
	}
	e := newEdges(g, r)
	for ti := pos.TypeIndex; ti < len(g.types); ti++ {
		after, skip := store.Cursor(""), 0
		if ti == pos.TypeIndex {
			after, skip = pos.After, pos.Skip
		}
		more, err := lookupType(ctx, e, ti, after, skip, yield)
		if err != nil || !more {
			return historyErr(err)
		}
	}
	return nil
}

// lookupType yields the pairs of the sets of g.types[ti]: the relationships of the
// type are read in key order, so each object's arrive together; its pairs, with the
// child sets below its sets, are sorted and each sent once.
func lookupType(ctx context.Context, e *edges, ti int, after store.Cursor, skip int, yield func(Pair, LookupPosition) bool) (bool, error) {
	g := e.g
	var (
		pairs    []Pair
		id       string
		start    = after // the cursor before the current object's first relationship
		lastCur  store.Cursor
		haveLast bool
		lastItem store.Item
	)
	flush := func() (bool, error) {
		closed, err := e.closePairs(ctx, pairs)
		if err != nil {
			return false, err
		}
		for i := skip; i < len(closed); i++ {
			next := LookupPosition{TypeIndex: ti, After: start, Skip: i + 1}
			if i == len(closed)-1 {
				next = LookupPosition{TypeIndex: ti, After: lastCur}
			}
			if !yield(closed[i], next) {
				return false, nil
			}
		}
		skip, pairs = 0, pairs[:0]
		return true, nil
	}
	f := store.Filter{ResourceType: g.types[ti]}
	for item, err := range e.r.Query(ctx, f, store.QueryOptions{After: after}) {
		if err != nil {
			return false, err
		}
		x := &item.Relationship
		if haveLast && x.Resource.ID != id {
			lastCur = lastItem.Cursor()
			if more, err := flush(); !more || err != nil {
				return false, err
			}
			start = lastCur
		}
		id, haveLast, lastItem = x.Resource.ID, true, item
		if counts(x) {
			pairs = g.pairsOf(pairs, x)
		}
	}
	if haveLast {
		lastCur = lastItem.Cursor()
		return flush()
	}
	return true, nil
}

// exists reports whether pair pr holds at r: some relationship that counts makes it.
func (g *setGraph) exists(ctx context.Context, r store.Reader, pr Pair) (bool, error) {
	n := g.nodes[relKey{pr.Set.Type, pr.Set.Relation}]
	if n == nil {
		return false, nil
	}
	for _, s := range n.sources {
		sf := &store.SubjectFilter{Type: pr.Child.Type, IDs: []string{pr.Child.ID}}
		switch {
		case s.arrow != "":
			if !pr.Child.IsSet || pr.Child.Relation != s.arrow {
				continue
			}
		case pr.Child.IsSet:
			sf.Relation, sf.RelationSet = pr.Child.Relation, true
		default:
			sf.RelationSet = true
		}
		f := store.Filter{ResourceType: pr.Set.Type, ResourceIDs: []string{pr.Set.ID}, Relation: s.rel, Subject: sf}
		for item, err := range r.Query(ctx, f, store.QueryOptions{}) {
			if err != nil {
				return false, err
			}
			if counts(&item.Relationship) {
				// What the arrow or the relation makes of it is pr: the pair was derived
				// from a relationship of this shape.
				if slices.Contains(g.pairsOf(nil, &item.Relationship), pr) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// EventKind is what a SetEvent reports.
type EventKind uint8

const (
	// EventChange: Pair was added to or removed from the sets at Revision.
	EventChange EventKind = iota + 1
	// EventCompleted: every change of Revision was sent (or it changed nothing).
	EventCompleted
	// EventBreaking: the schema written at Revision changed what the sets are made
	// of; they must be looked up again at Revision. Affected lists the targets whose
	// sets changed shape.
	EventBreaking
)

// SetEvent is one event of a watch of the permission sets.
type SetEvent struct {
	Kind     EventKind
	Revision store.Revision
	Pair     Pair
	Added    bool
	Affected []Target
}

// ErrHistoryGone: a watch or lookup asked for a revision older than the history the
// store keeps. It wraps store.ErrRevisionGone.
var ErrHistoryGone = fmt.Errorf("%w: the permission sets are not kept that far back; run LookupPermissionSets again from the start (no cursor) and watch from its revision, or resume a watch from a newer token it sent", store.ErrRevisionGone)

// Watch yields the changes of the permission sets after revision after, in revision
// order: each revision's changes, then its EventCompleted; an idle store's
// checkpoints as EventCompleted; a breaking schema change as EventBreaking (its
// revision has no other event). It ends with the first error.
func (p *PermissionSets) Watch(ctx context.Context, w store.Watcher, after store.Revision, checkpoints time.Duration) iter.Seq2[SetEvent, error] {
	return func(yield func(SetEvent, error) bool) {
		g, _, err := p.graphAt(ctx, after)
		if err != nil {
			yield(SetEvent{}, historyErr(err))
			return
		}
		prev := after
		var cands []Pair
		for ch, err := range w.Watch(ctx, after, store.WatchOptions{CheckpointInterval: checkpoints}) {
			if err != nil {
				yield(SetEvent{}, historyErr(err))
				return
			}
			rev := ch.Revision
			if ch.Checkpoint {
				prev = rev
				if !yield(SetEvent{Kind: EventCompleted, Revision: rev}, nil) {
					return
				}
				continue
			}
			if ch.SchemaChanged {
				ng, _, err := p.graphAt(ctx, rev)
				if err != nil {
					yield(SetEvent{}, historyErr(err))
					return
				}
				if ng.sig != g.sig {
					ev := SetEvent{Kind: EventBreaking, Revision: rev}
					for _, t := range p.targets {
						if g.targetSig(t) != ng.targetSig(t) {
							ev.Affected = append(ev.Affected, t)
						}
					}
					g, prev = ng, rev
					if !yield(ev, nil) {
						return
					}
					continue
				}
				// The same pairs from the same relationships; the new schema's
				// subject types are where the edges are read from now.
				g = ng
			}
			cands = cands[:0]
			for i := range ch.Updates {
				cands = g.pairsOf(cands, &ch.Updates[i].Relationship)
			}
			slices.SortFunc(cands, comparePairs)
			cands = slices.CompactFunc(cands, func(a, b Pair) bool { return comparePairs(a, b) == 0 })
			if len(cands) > 0 {
				more, err := p.diff(ctx, g, prev, rev, cands, func(ev SetEvent) bool { return yield(ev, nil) })
				if err != nil {
					yield(SetEvent{}, historyErr(err))
					return
				}
				if !more {
					return
				}
			}
			prev = rev
			if !yield(SetEvent{Kind: EventCompleted, Revision: rev}, nil) {
				return
			}
		}
	}
}

// diff yields the changes between revisions before and at that the direct pairs
// cands (those the revision's relationships make) bring: a member's as it is, a
// child set's through the closure. It reports false when yield did.
func (p *PermissionSets) diff(ctx context.Context, g *setGraph, before, at store.Revision, cands []Pair, yield func(SetEvent) bool) (bool, error) {
	rb, err := p.store.Reader(ctx, before)
	if err != nil {
		return false, err
	}
	ra, err := p.store.Reader(ctx, at)
	if err != nil {
		return false, err
	}
	var moved []SetEvent
	for _, pr := range cands {
		was, err := g.exists(ctx, rb, pr)
		if err != nil {
			return false, err
		}
		is, err := g.exists(ctx, ra, pr)
		if err != nil {
			return false, err
		}
		if was == is {
			continue
		}
		ev := SetEvent{Kind: EventChange, Revision: at, Pair: pr, Added: is}
		if pr.Child.IsSet {
			moved = append(moved, ev)
		} else if !yield(ev) {
			return false, nil
		}
	}
	if len(moved) == 0 {
		return true, nil
	}
	return closureChanges(ctx, newEdges(g, ra), at, moved, yield)
}

// historyErr says what to do about a revision past the store's history.
func historyErr(err error) error {
	if errors.Is(err, store.ErrRevisionGone) && !errors.Is(err, ErrHistoryGone) {
		return fmt.Errorf("%w (%v)", ErrHistoryGone, err)
	}
	return err
}
