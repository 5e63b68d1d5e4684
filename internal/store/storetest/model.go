package storetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// universe is the small vocabulary random tests draw from; small so that random
// operations collide often.
type universe struct {
	types, ids, relations, subjectTypes, subjectIDs, subjectRels []string
}

var modelUniverse = universe{
	types: []string{"doc", "folder"}, ids: []string{"a", "b", "ab", "c"},
	relations: []string{"viewer", "owner"}, subjectTypes: []string{"user", "group"},
	subjectIDs: []string{"x", "y", "*"}, subjectRels: []string{"", "member"},
}

func pick[T any](rnd *rand.Rand, xs []T) T { return xs[rnd.IntN(len(xs))] }

func (u universe) relationship(rnd *rand.Rand) rel.Relationship {
	r := rel.Relationship{
		Resource: rel.ObjectRef{Type: pick(rnd, u.types), ID: pick(rnd, u.ids)},
		Relation: pick(rnd, u.relations),
		Subject: rel.SubjectRef{
			Object:   rel.ObjectRef{Type: pick(rnd, u.subjectTypes), ID: pick(rnd, u.subjectIDs)},
			Relation: pick(rnd, u.subjectRels),
		},
	}
	switch rnd.IntN(6) {
	case 0:
		r.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"n": float64(rnd.IntN(3))}}
	case 1:
		r.Caveat = &rel.Caveat{Name: "d"}
	}
	switch rnd.IntN(6) {
	case 0:
		r.Expiration = &past
	case 1:
		r.Expiration = &future
	}
	return r
}

// filter draws a filter whose fields are each set or not, sometimes to values no
// relationship has.
func (u universe) filter(rnd *rand.Rand) store.Filter {
	maybe := func(xs []string) string {
		if rnd.IntN(2) == 0 {
			return ""
		}
		if rnd.IntN(8) == 0 {
			return "unknown"
		}
		return pick(rnd, xs)
	}
	some := func(xs []string) []string {
		if rnd.IntN(2) == 0 {
			return nil
		}
		var out []string
		for range 1 + rnd.IntN(3) {
			out = append(out, pick(rnd, append(xs, "unknown")))
		}
		return out
	}
	f := store.Filter{ResourceType: maybe(u.types), ResourceIDs: some(u.ids), Relation: maybe(u.relations), IncludeExpired: rnd.IntN(4) == 0}
	if rnd.IntN(6) == 0 {
		f.ResourceIDPrefix = "a"
	}
	if rnd.IntN(2) == 0 {
		f.Subject = &store.SubjectFilter{Type: maybe(u.subjectTypes), IDs: some(u.subjectIDs)}
		if rnd.IntN(2) == 0 {
			f.Subject.RelationSet, f.Subject.Relation = true, pick(rnd, u.subjectRels)
		}
	}
	return f
}

// model is the obviously correct store: a full copy of the state at every revision.
type model struct {
	states  map[store.Revision]map[rel.Key]rel.Relationship
	schemas map[store.Revision]string
	head    store.Revision
}

func (m *model) state() map[rel.Key]rel.Relationship { return m.states[m.head] }

func (m *model) commit(rev store.Revision, next map[rel.Key]rel.Relationship, schema string) error {
	if rev <= m.head {
		return fmt.Errorf("write returned revision %d, not after %d", rev, m.head)
	}
	m.states[rev], m.schemas[rev], m.head = next, schema, rev
	return nil
}

// query returns the model's answer, in key order.
func (m *model) query(rev store.Revision, f store.Filter, now time.Time) []rel.Relationship {
	var out []rel.Relationship
	for _, r := range m.states[rev] {
		if f.Matches(r, now) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b rel.Relationship) int { return store.CompareKeys(a.Key(), b.Key()) })
	return out
}

func (m *model) matches(f store.Filter, now time.Time) bool { return len(m.query(m.head, f, now)) > 0 }

// write predicts a write's outcome: the error kind it must fail with, or the next state.
func (m *model) write(pre []store.Precondition, us []store.Update, now time.Time) (map[rel.Key]rel.Relationship, any) {
	seen := map[rel.Key]bool{}
	for _, u := range us {
		if seen[u.Relationship.Key()] {
			return nil, new(*store.DuplicateUpdateError)
		}
		seen[u.Relationship.Key()] = true
	}
	for _, p := range pre {
		if m.matches(p.Filter, now) != (p.Op == store.MustMatch) {
			return nil, new(*store.PreconditionFailedError)
		}
	}
	next := maps.Clone(m.state())
	for _, u := range us {
		k := u.Relationship.Key()
		switch u.Op {
		case store.Create:
			if cur, ok := next[k]; ok && !cur.ExpiredAt(now) {
				return nil, new(*store.AlreadyExistsError)
			}
			next[k] = u.Relationship
		case store.Touch:
			next[k] = u.Relationship
		case store.Delete:
			delete(next, k)
		}
	}
	return next, nil
}

// testRandomModel applies random operations to the store and the model and compares
// reads at every revision, paged with random limits.
func testRandomModel(h *harness) {
	for seed := range uint64(8) {
		// Each seed starts from an empty state: clear what earlier seeds left.
		if _, _, _, err := h.s.DeleteByFilter(h.ctx, nil, store.Filter{IncludeExpired: true}, 0, false); err != nil {
			h.t.Fatal(err)
		}
		m := &model{states: map[store.Revision]map[rel.Key]rel.Relationship{}, schemas: map[store.Revision]string{}}
		m.head = h.head()
		m.states[m.head], m.schemas[m.head] = map[rel.Key]rel.Relationship{}, schemaAt(h, m.head)
		rnd := rand.New(rand.NewPCG(seed, 99))
		for step := range 150 {
			if err := randomStep(h, m, rnd); err != nil {
				h.t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			for range 3 {
				if err := compareRead(h, m, rnd); err != nil {
					h.t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			}
		}
	}
}

func schemaAt(h *harness, rev store.Revision) string {
	text, err := h.reader(rev).Schema(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return text
}

// randomStep applies one random operation to both and checks they agree on its outcome.
func randomStep(h *harness, m *model, rnd *rand.Rand) error {
	u := modelUniverse
	now := time.Now()
	switch n := rnd.IntN(20); {
	case n == 0:
		text := fmt.Sprintf("definition v%d {}", rnd.IntN(1000))
		rev, err := h.s.WriteSchema(h.ctx, text, nil)
		if err != nil {
			return err
		}
		return m.commit(rev, m.state(), text)
	case n <= 2:
		return randomDelete(h, m, rnd, now)
	}
	var us []store.Update
	for range rnd.IntN(5) {
		us = append(us, store.Update{Op: store.Op(1 + rnd.IntN(3)), Relationship: u.relationship(rnd)})
	}
	var pre []store.Precondition
	if rnd.IntN(4) == 0 {
		pre = append(pre, store.Precondition{Op: store.PreconditionOp(1 + rnd.IntN(2)), Filter: u.filter(rnd)})
	}
	next, wantErr := m.write(pre, us, now)
	rev, err := h.s.Write(h.ctx, pre, us, nil)
	if err := sameOutcome(err, wantErr); err != nil {
		return fmt.Errorf("write %v with preconditions %v: %w", us, pre, err)
	}
	if err != nil {
		if h.head() != m.head {
			return fmt.Errorf("failed write moved the head from %d to %d", m.head, h.head())
		}
		return nil
	}
	return m.commit(rev, next, m.schemas[m.head])
}

func randomDelete(h *harness, m *model, rnd *rand.Rand, now time.Time) error {
	f := modelUniverse.filter(rnd)
	limit, partial := rnd.IntN(4), rnd.IntN(2) == 0
	matched := m.query(m.head, f, now)
	rev, n, more, err := h.s.DeleteByFilter(h.ctx, nil, f, limit, partial)
	if limit > 0 && len(matched) > limit && !partial {
		if !errors.Is(err, store.ErrTooManyToDelete) {
			return fmt.Errorf("delete %s limit %d of %d matches: %v, want ErrTooManyToDelete", f, limit, len(matched), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", f, err)
	}
	wantMore := limit > 0 && len(matched) > limit
	if wantMore {
		matched = matched[:limit]
	}
	if n != len(matched) || more != wantMore {
		return fmt.Errorf("delete %s limit %d partial %v: deleted %d more %v, want %d %v", f, limit, partial, n, more, len(matched), wantMore)
	}
	next := maps.Clone(m.state())
	for _, r := range matched {
		delete(next, r.Key())
	}
	return m.commit(rev, next, m.schemas[m.head])
}

// sameOutcome checks err against the model's expected error kind (nil: success).
func sameOutcome(err error, want any) error {
	switch {
	case want == nil && err == nil:
		return nil
	case want == nil:
		return fmt.Errorf("got error %v, want success", err)
	case err == nil:
		return fmt.Errorf("got success, want %T", want)
	case !errors.As(err, want):
		return fmt.Errorf("got error %v, want %T", err, want)
	}
	return nil
}

// compareRead reads a random filter at a random revision, in random pages, and
// compares it with the model.
func compareRead(h *harness, m *model, rnd *rand.Rand) error {
	revs := slices.Sorted(maps.Keys(m.states))
	rev := pick(rnd, revs)
	f := modelUniverse.filter(rnd)
	want := m.query(rev, f, time.Now())
	limit := rnd.IntN(4)
	var got []rel.Relationship
	var after store.Cursor
	r, err := h.s.Reader(h.ctx, rev)
	if err != nil {
		return err
	}
	for page := 0; ; page++ {
		n := 0
		for item, err := range r.Query(h.ctx, f, store.QueryOptions{Limit: limit, After: after}) {
			if err != nil {
				return fmt.Errorf("query %s at %d: %w", f, rev, err)
			}
			got = append(got, item.Relationship)
			after = item.Cursor()
			n++
		}
		if limit == 0 || n < limit || page > 100 {
			break
		}
	}
	if len(got) != len(want) || !slices.EqualFunc(got, want, sameRelationship) {
		return fmt.Errorf("query %s at %d (pages of %d):\n got  %v\n want %v", f, rev, limit, got, want)
	}
	if text, err := r.Schema(h.ctx); err != nil || text != m.schemas[rev] {
		return fmt.Errorf("schema at %d: %q, %v; want %q", rev, text, err, m.schemas[rev])
	}
	return nil
}
