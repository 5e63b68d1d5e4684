package materialize

import (
	"context"
	"slices"

	"github.com/latch-authz/latch/internal/store"
)

// The permission sets stream each set's child sets transitively, as AuthZed
// Materialize does (Leopard's GROUP2GROUP; its members, MEMBER2GROUP, stay direct):
// set C is a child of set P when a chain of direct child sets leads from C to P, and
// never of itself, even on a cycle. So AuthZed's documented join (a subject's sets,
// then one hop through set_to_set) answers. The direct child sets are the *edges*;
// a lookup walks the edges below each set, and a revision that adds or removes edges
// diffs, for each set below them, the sets above it before and at the revision.

// edgeRead is one read of the relationships that may be edges: those of relation
// rel of type def whose subject is of type subjectType.
type edgeRead struct{ def, rel, subjectType string }

// addReads records the reads link l of node k needs: down from k's sets to their
// child sets, up from a set of l.child to the sets of k holding it.
func (g *setGraph) addReads(k relKey, l link) {
	r := edgeRead{k.def, l.rel, l.child.def}
	if !slices.Contains(g.down[k], r) {
		g.down[k] = append(g.down[k], r)
	}
	if !slices.Contains(g.up[l.child], r) {
		g.up[l.child] = append(g.up[l.child], r)
	}
}

// setOf is the set a child set names.
func setOf(c SetChild) SetRef { return SetRef{c.Type, c.ID, c.Relation} }

// childOf is set s as a child set.
func childOf(s SetRef) SetChild { return SetChild{s.Type, s.ID, s.Relation, true} }

// maxCachedEdges bounds the sets whose edges one edges value keeps: past it the
// cache starts afresh, so a lookup's memory stays bounded however many sets it walks.
const maxCachedEdges = 1 << 16

// edges reads the edges of a graph at one revision, each set's once (up to
// maxCachedEdges sets each way), and, given the edges that revision moved, the
// graph just before it: the same edges with those moves undone.
type edges struct {
	g        *setGraph
	r        store.Reader
	down, up map[SetRef][]SetRef
	buf      []Pair
	// undo holds, by child (up) and by parent (down), the edges the revision moved.
	undoUp, undoDown map[SetRef][]move
}

// move is an edge to or from set s that a revision added or removed.
type move struct {
	s     SetRef
	added bool
}

// undo records the moved edges (direct child-set pairs that appeared, Added, or went).
func (e *edges) undo(moved []SetEvent) {
	e.undoUp, e.undoDown = map[SetRef][]move{}, map[SetRef][]move{}
	for _, m := range moved {
		c := setOf(m.Pair.Child)
		e.undoUp[c] = append(e.undoUp[c], move{m.Pair.Set, m.Added})
		e.undoDown[m.Pair.Set] = append(e.undoDown[m.Pair.Set], move{c, m.Added})
	}
}

// adjacent returns the sets next to s upward (its parents) or downward (its
// children), before the revision's moves when before.
func (e *edges) adjacent(ctx context.Context, s SetRef, up, before bool) ([]SetRef, error) {
	next, err := e.children(ctx, s)
	moves := e.undoDown[s]
	if up {
		next, err = e.parents(ctx, s)
		moves = e.undoUp[s]
	}
	if err != nil || !before || len(moves) == 0 {
		return next, err
	}
	next = slices.Clone(next)
	for _, m := range moves {
		if m.added {
			next = slices.DeleteFunc(next, func(x SetRef) bool { return x == m.s })
		} else {
			next = append(next, m.s)
		}
	}
	slices.SortFunc(next, compareSets)
	return slices.Compact(next), nil
}

func newEdges(g *setGraph, r store.Reader) *edges {
	return &edges{g: g, r: r, down: map[SetRef][]SetRef{}, up: map[SetRef][]SetRef{}}
}

// children returns the direct child sets of s.
func (e *edges) children(ctx context.Context, s SetRef) ([]SetRef, error) {
	if out, ok := e.down[s]; ok {
		return out, nil
	}
	var out []SetRef
	for _, rd := range e.g.down[relKey{s.Type, s.Relation}] {
		f := store.Filter{ResourceType: rd.def, ResourceIDs: []string{s.ID}, Relation: rd.rel, Subject: &store.SubjectFilter{Type: rd.subjectType}}
		var err error
		if out, err = e.read(ctx, f, out, func(pr Pair) (SetRef, bool) { return setOf(pr.Child), pr.Set == s }); err != nil {
			return nil, err
		}
	}
	return e.keep(e.down, s, out), nil
}

// parents returns the sets s is a direct child set of.
func (e *edges) parents(ctx context.Context, s SetRef) ([]SetRef, error) {
	if out, ok := e.up[s]; ok {
		return out, nil
	}
	var out []SetRef
	c := childOf(s)
	for _, rd := range e.g.up[relKey{s.Type, s.Relation}] {
		f := store.Filter{ResourceType: rd.def, Relation: rd.rel, Subject: &store.SubjectFilter{Type: rd.subjectType, IDs: []string{s.ID}}}
		var err error
		if out, err = e.read(ctx, f, out, func(pr Pair) (SetRef, bool) { return pr.Set, pr.Child == c }); err != nil {
			return nil, err
		}
	}
	return e.keep(e.up, s, out), nil
}

// read appends, for the relationships f selects that count, the set pick takes of
// each pair they make (the same pairs a lookup's scan makes of them).
func (e *edges) read(ctx context.Context, f store.Filter, out []SetRef, pick func(Pair) (SetRef, bool)) ([]SetRef, error) {
	for item, err := range e.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		if !counts(&item.Relationship) {
			continue
		}
		e.buf = e.g.pairsOf(e.buf[:0], &item.Relationship)
		for _, pr := range e.buf {
			if s, ok := pick(pr); ok && pr.Child.IsSet {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// keep stores the sorted, distinct edges of s in cache.
func (e *edges) keep(cache map[SetRef][]SetRef, s SetRef, out []SetRef) []SetRef {
	slices.SortFunc(out, compareSets)
	out = slices.Compact(out)
	if len(cache) >= maxCachedEdges {
		clear(cache)
	}
	cache[s] = out
	return out
}

func compareSets(a, b SetRef) int {
	return comparePairs(Pair{Set: a}, Pair{Set: b})
}

// reach returns the sets reachable from the sets start by edges downward (up false:
// their descendants) or upward (their ancestors), start included, from excluded;
// before the revision's moves when before.
func (e *edges) reach(ctx context.Context, from SetRef, start []SetRef, up, before bool) (map[SetRef]bool, error) {
	seen := map[SetRef]bool{}
	queue := slices.Clone(start)
	for _, s := range start {
		seen[s] = true
	}
	for len(queue) > 0 {
		s := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		next, err := e.adjacent(ctx, s, up, before)
		if err != nil {
			return nil, err
		}
		for _, n := range next {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	delete(seen, from)
	return seen, nil
}

// closePairs replaces the child sets among the direct pairs of one object's sets by
// each set's descendants (the set itself excluded), reading the edges below them.
func (e *edges) closePairs(ctx context.Context, pairs []Pair) ([]Pair, error) {
	slices.SortFunc(pairs, comparePairs)
	pairs = slices.CompactFunc(pairs, func(a, b Pair) bool { return comparePairs(a, b) == 0 })
	out := pairs[:0:0]
	var direct []SetRef
	for i, pr := range pairs {
		if !pr.Child.IsSet {
			out = append(out, pr)
		} else {
			direct = append(direct, setOf(pr.Child))
		}
		if i+1 < len(pairs) && pairs[i+1].Set == pr.Set {
			continue
		}
		if len(direct) > 0 {
			below, err := e.reach(ctx, pr.Set, direct, false, false)
			if err != nil {
				return nil, err
			}
			for d := range below {
				out = append(out, Pair{pr.Set, childOf(d)})
			}
			direct = direct[:0]
		}
	}
	slices.SortFunc(out, comparePairs)
	return out, nil
}

// closureChanges yields, at revision at (e reads it), the child-set pairs that the
// edges moved (the direct child sets that appeared, Added, or went since the revision
// before) add to or remove from the closure. A pair (D, A) changes only if a moved
// edge C→P lies on a chain from D to A in the revision that has the pair, so D is C
// or below C there; for each such D the sets above it before and at are compared.
// The cost is the sets below the moved edges times the sets above them, each set's
// edges read once, at the revision (before it they are the same but for the moves);
// the pairs are yielded as found, not held.
func closureChanges(ctx context.Context, e *edges, at store.Revision, moved []SetEvent, yield func(SetEvent) bool) (bool, error) {
	e.undo(moved)
	below := map[SetRef]bool{}
	for _, m := range moved {
		c := setOf(m.Pair.Child)
		ds, err := e.reach(ctx, SetRef{}, []SetRef{c}, false, !m.Added)
		if err != nil {
			return false, err
		}
		for d := range ds {
			below[d] = true
		}
	}
	ds := make([]SetRef, 0, len(below))
	for d := range below {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, compareSets)
	var changes []SetEvent
	for _, d := range ds {
		was, err := e.reach(ctx, d, []SetRef{d}, true, true)
		if err != nil {
			return false, err
		}
		is, err := e.reach(ctx, d, []SetRef{d}, true, false)
		if err != nil {
			return false, err
		}
		changes = changes[:0]
		for a := range is {
			if !was[a] {
				changes = append(changes, SetEvent{Kind: EventChange, Revision: at, Pair: Pair{a, childOf(d)}, Added: true})
			}
		}
		for a := range was {
			if !is[a] {
				changes = append(changes, SetEvent{Kind: EventChange, Revision: at, Pair: Pair{a, childOf(d)}})
			}
		}
		slices.SortFunc(changes, func(x, y SetEvent) int { return comparePairs(x.Pair, y.Pair) })
		for _, ev := range changes {
			if !yield(ev) {
				return false, nil
			}
		}
	}
	return true, nil
}
