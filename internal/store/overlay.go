package store

import (
	"context"
	"errors"
	"iter"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// errOverlayPaged refuses a paged query on an overlay: its relationships have no
// position in the store's cursors.
var errOverlayPaged = errors.New("a reader with request-scoped relationships answers whole queries only, without a limit or cursor")

// WithUpdates returns a reader that answers as r would after updates (touches,
// creates and deletes) were applied, without writing them: Permify's contextual
// tuples and attributes, which count for one request alone. Its answers are not
// those of r's revision, so they must not be cached under it. Queries with a limit or
// a cursor are refused; evaluation reads whole queries.
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
		if opts.Limit != 0 || opts.After != "" {
			yield(Item{}, errOverlayPaged)
			return
		}
		var extra []rel.Relationship
		for _, x := range o.added {
			if f.Matches(x, o.now) {
				extra = append(extra, x)
			}
		}
		for item, err := range o.Reader.Query(ctx, f, opts) {
			if err != nil {
				yield(Item{}, err)
				return
			}
			k := item.Relationship.Key()
			for len(extra) > 0 && CompareKeys(extra[0].Key(), k) < 0 {
				if !yield(Item{Relationship: extra[0]}, nil) {
					return
				}
				extra = extra[1:]
			}
			if o.removed[k] {
				continue
			}
			if !yield(item, nil) {
				return
			}
		}
		for _, x := range extra {
			if !yield(Item{Relationship: x}, nil) {
				return
			}
		}
	}
}
