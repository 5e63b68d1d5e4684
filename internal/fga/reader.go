package fga

import (
	"context"
	"iter"
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
// refused with ErrorCode_invalid_tuple otherwise). With contextual tuples the answers
// are not those of r's revision: evaluate them with an uncached engine.
func (m *Model) Reader(r store.Reader, contextual []*openfgav1.TupleKey, now time.Time) (store.Reader, error) {
	out := store.Reader(&admitted{Reader: r, m: m})
	if len(contextual) == 0 {
		return out, nil
	}
	if len(contextual) > MaxContextualTuples {
		return nil, newError(openfgav1.ErrorCode_exceeded_entity_limit, "%d contextual tuples, more than the limit of %d", len(contextual), MaxContextualTuples)
	}
	updates := make([]store.Update, 0, len(contextual))
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
		updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
	}
	return store.WithUpdates(out, updates, now), nil
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
