package fga

import (
	"context"
	"iter"
	"slices"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// MaxContextualTuples is OpenFGA's limit on the contextual tuples of one request.
const MaxContextualTuples = 100

// Reader returns the reader evaluation under m reads: r, less the stored tuples m
// does not admit (written under another model: a type restriction, condition or
// relation m lacks), plus the request's contextual tuples, which m must admit (each
// refused with ErrorCode_invalid_tuple otherwise), read beside or in place of a stored
// tuple of the same key as OpenFGA reads them (withContextual). With contextual tuples
// the answers are not those of r's revision: evaluate them with an uncached engine.
func (m *Model) Reader(r store.Reader, contextual []*openfgav1.TupleKey, now time.Time) (store.Reader, error) {
	out := store.Reader(&admitted{Reader: r, m: m})
	if len(contextual) == 0 {
		return out, nil
	}
	if len(contextual) > MaxContextualTuples {
		return nil, newError(openfgav1.ErrorCode_exceeded_entity_limit, "%d contextual tuples, more than the limit of %d", len(contextual), MaxContextualTuples)
	}
	added := make([]rel.Relationship, 0, len(contextual))
	seen := make(map[rel.Key]bool, len(contextual))
	for _, tk := range contextual {
		x, err := m.Relationship(tk)
		if err != nil {
			return nil, err
		}
		if seen[x.Key()] {
			continue // OpenFGA ignores a repeated contextual tuple
		}
		seen[x.Key()] = true
		added = append(added, x)
	}
	slices.SortFunc(added, func(a, b rel.Relationship) int { return store.CompareKeys(a.Key(), b.Key()) })
	return &withContextual{Reader: out, tuples: added, now: now}, nil
}

// withContextual reads a request's contextual tuples as OpenFGA reads them beside
// the stored ones: a read of named users' tuples (a Check's direct tuples) takes a
// contextual tuple of such a user in place of the stored tuple of the same key;
// every other read (the wildcard's tuples beside a user's, subject sets, tuplesets,
// all of an object's tuples) yields both, each with its own condition.
type withContextual struct {
	store.Reader
	tuples []rel.Relationship // in key order
	now    time.Time
}

func (c *withContextual) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	var replace []store.Update
	var add []rel.Relationship
	for _, x := range c.tuples {
		switch {
		case !f.Matches(x, c.now):
		case replacesStored(f, x):
			replace = append(replace, store.Update{Op: store.Touch, Relationship: x})
		default:
			add = append(add, x)
		}
	}
	return store.WithAdded(store.WithUpdates(c.Reader, replace, c.now), add, c.now).Query(ctx, f, opts)
}

// Contextual returns the request's contextual tuples f matches, in key order: the
// engine's reads from the subject's side take an object's contextual tuple alone,
// as OpenFGA does (engine/weight2.go).
func (c *withContextual) Contextual(f store.Filter) []rel.Relationship {
	var out []rel.Relationship
	for _, x := range c.tuples {
		if f.Matches(x, c.now) {
			out = append(out, x)
		}
	}
	return out
}

// replacesStored reports whether f reads the tuples of named users and x is one of
// them. A wildcard's tuple is always read beside the stored one: OpenFGA takes it in
// place of the stored one only in a Check of the wildcard itself, which a read of
// the wildcard's tuples alone does not tell from a Check of a user on a relation
// that admits only the wildcard.
func replacesStored(f store.Filter, x rel.Relationship) bool {
	return f.Subject != nil && len(f.Subject.IDs) > 0 && x.Subject.Object.ID != rel.Wildcard
}

// admitted hides the tuples its model does not admit.
type admitted struct {
	store.Reader
	m *Model
}

func (a *admitted) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	return store.Iterate(ctx, a, f, opts)
}

// QueryEach hands on the admitted items. A limit counts them, not the hidden ones.
func (a *admitted) QueryEach(ctx context.Context, f store.Filter, opts store.QueryOptions, v store.Visitor) error {
	limit := opts.Limit
	opts.Limit = 0
	fv := &admitVisitor{m: a.m, next: v, limit: limit}
	return store.Each(ctx, a.Reader, f, opts, fv)
}

type admitVisitor struct {
	m     *Model
	next  store.Visitor
	limit int
	n     int
}

func (v *admitVisitor) Visit(item store.Item) bool {
	if !v.m.Admits(item.Relationship) {
		return true
	}
	v.n++
	return v.next.Visit(item) && (v.limit <= 0 || v.n < v.limit)
}
