package permdata

import (
	"container/heap"
	"context"
	"errors"
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
	ids, _, err := LookupSubjectsPage(ctx, e, s, r, req, "", 0)
	return ids, err
}

// LookupSubjectsPage is one page of LookupSubjects, in id order: the first size ids
// after after (all of them when size is 0), and whether more follow. It holds the
// page, not the answer. Where no wildcard can come (engine.SubjectWildcards), the
// engine's answer is the page's order: the lookup starts after after and stops once the
// page is full. Otherwise the ids are kept in a bounded heap as the lookup finds them,
// as a wildcard's subjects must be merged in.
func LookupSubjectsPage(ctx context.Context, e *engine.Engine, s *Schema, r store.Reader, req engine.LookupSubjectsRequest, after string, size int) (ids []string, more bool, err error) {
	if !engine.SubjectWildcards(s.IR, req) {
		req.After = after
		err := e.LookupSubjects(ctx, s.IR, r, req, func(f engine.FoundSubject) error {
			if f.Result.Membership != engine.HasPermission {
				return nil
			}
			if size > 0 && len(ids) == size {
				more = true
				return errPageFull
			}
			ids = append(ids, f.ID)
			return nil
		})
		if err != nil && !errors.Is(err, errPageFull) {
			return nil, false, err
		}
		return ids, more, nil
	}
	page := newIDPage(after, size)
	var wildcard *engine.FoundSubject
	err = e.LookupSubjects(ctx, s.IR, r, req, func(f engine.FoundSubject) error {
		switch {
		case f.Result.Membership != engine.HasPermission:
		case f.ID == rel.Wildcard:
			wildcard = &f
		default:
			page.add(f.ID)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if wildcard != nil {
		excluded := map[string]bool{}
		for _, x := range wildcard.Excluded {
			excluded[x.ID] = true
		}
		f := store.Filter{Subject: &store.SubjectFilter{Type: req.SubjectType, Relation: req.SubjectRelation, RelationSet: true}}
		for it, err := range r.Query(ctx, f, store.QueryOptions{}) {
			if err != nil {
				return nil, false, err
			}
			if id := it.Relationship.Subject.Object.ID; id != rel.Wildcard && !excluded[id] {
				page.add(id)
			}
		}
	}
	ids, more = page.result()
	return ids, more, nil
}

// errPageFull stops an ordered lookup once its page is full.
var errPageFull = errors.New("page full")

// idPage collects the least distinct ids after a bound, up to a size (unbounded when
// 0) and one more, to tell whether more follow. Bounded, it keeps them in a max-heap,
// whose greatest id a lesser one replaces; an id turned out this way never returns,
// as the greatest kept only decreases.
type idPage struct {
	after string
	size  int
	ids   []string // a max-heap when size is set
	kept  map[string]bool
}

func newIDPage(after string, size int) *idPage {
	return &idPage{after: after, size: size, kept: map[string]bool{}}
}

func (p *idPage) add(id string) {
	if id <= p.after || p.kept[id] {
		return
	}
	if p.size == 0 {
		p.ids = append(p.ids, id)
		p.kept[id] = true
		return
	}
	if len(p.ids) <= p.size {
		p.kept[id] = true
		heap.Push((*maxHeap)(&p.ids), id)
		return
	}
	if id >= p.ids[0] {
		return
	}
	delete(p.kept, p.ids[0])
	p.kept[id] = true
	p.ids[0] = id
	heap.Fix((*maxHeap)(&p.ids), 0)
}

// result returns the page in id order and whether more ids follow it.
func (p *idPage) result() ([]string, bool) {
	slices.Sort(p.ids)
	if p.size > 0 && len(p.ids) > p.size {
		return p.ids[:p.size], true
	}
	return p.ids, false
}

// maxHeap is a heap of strings, greatest first.
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
