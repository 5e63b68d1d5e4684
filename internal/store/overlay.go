package store

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// WithUpdates returns a reader that answers as r would after updates (touches,
// creates and deletes) were applied, without writing them: Permify's contextual
// tuples and attributes, which count for one request alone. Its answers are not
// those of r's revision, so they must not be cached under it. Its cursors are the
// store's (relationship keys), so a page resumes after a relationship of either kind.
func WithUpdates(r Reader, updates []Update, now time.Time) Reader {
	o := &overlay{Reader: r, now: now, removed: map[rel.Key]bool{}}
	for _, u := range updates {
		k := u.Relationship.Key()
		o.removed[k] = true
		o.added = slices.DeleteFunc(o.added, func(x rel.Relationship) bool { return x.Key() == k })
		if u.Op != Delete {
			o.added = append(o.added, u.Relationship)
		}
	}
	slices.SortFunc(o.added, func(a, b rel.Relationship) int { return CompareKeys(a.Key(), b.Key()) })
	return o
}

// WithAdded returns a reader that answers as r would with added beside its own
// relationships: a stored relationship with the key of an added one is kept, and
// both are read (OpenFGA's contextual tuples, which it reads together with the
// stored tuple of the same key, each with its own condition). As for WithUpdates,
// its answers must not be cached under r's revision.
func WithAdded(r Reader, added []rel.Relationship, now time.Time) Reader {
	o := &overlay{Reader: r, now: now, removed: map[rel.Key]bool{}, added: slices.Clone(added)}
	slices.SortFunc(o.added, func(a, b rel.Relationship) int { return CompareKeys(a.Key(), b.Key()) })
	return o
}

type overlay struct {
	Reader
	now     time.Time
	added   []rel.Relationship // in key order
	removed map[rel.Key]bool   // keys whose stored relationship the updates replace or delete
}

// Query merges the stored relationships matching f, less those the updates replace,
// with the updates' relationships matching f, in key order.
func (o *overlay) Query(ctx context.Context, f Filter, opts QueryOptions) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		codec := NewCursorCodec(f)
		var after *rel.Key
		if opts.After != "" {
			k, err := codec.Decode(opts.After)
			if err != nil {
				yield(Item{}, err)
				return
			}
			after = &k
		}
		var extra []rel.Relationship
		for _, x := range o.added {
			if f.Matches(x, o.now) && (after == nil || CompareKeys(x.Key(), *after) > 0) {
				extra = append(extra, x)
			}
		}
		emitted := 0
		// emit yields x and reports whether the query goes on.
		emit := func(x rel.Relationship) bool {
			if !yield(NewItem(x, codec), nil) {
				return false
			}
			emitted++
			return opts.Limit <= 0 || emitted < opts.Limit
		}
		// The store's read has no limit: relationships the updates replace are dropped.
		for item, err := range o.Reader.Query(ctx, f, QueryOptions{After: opts.After}) {
			if err != nil {
				yield(Item{}, err)
				return
			}
			k := item.Relationship.Key()
			for len(extra) > 0 && CompareKeys(extra[0].Key(), k) < 0 {
				if !emit(extra[0]) {
					return
				}
				extra = extra[1:]
			}
			if !o.removed[k] && !emit(item.Relationship) {
				return
			}
		}
		for _, x := range extra {
			if !emit(x) {
				return
			}
		}
	}
}
