package sqlstore

import (
	"context"
	"iter"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Batch is a checked write batch split by what each update does to the table.
type Batch struct {
	// Ends are the keys whose current row is ended: deletes and touches.
	Ends KeyArrays
	// Deletes are the keys of deletes alone.
	Deletes KeyArrays
	// EndsExpired are the keys of creates: their current row is ended only when it
	// has expired (a live one makes the create fail).
	EndsExpired KeyArrays
	// Inserts are the new rows of creates and touches.
	Inserts RowArrays
	// Creates are the relationships created, to name one in an AlreadyExistsError.
	Creates map[rel.Key]rel.Relationship
}

// SplitUpdates sorts checked updates into a Batch.
func SplitUpdates(updates []store.Update) (*Batch, error) {
	b := &Batch{Creates: map[rel.Key]rel.Relationship{}}
	for _, u := range updates {
		k := u.Relationship.Key()
		switch u.Op {
		case store.Delete:
			b.Ends.Add(k)
			b.Deletes.Add(k)
			continue
		case store.Touch:
			b.Ends.Add(k)
		case store.Create:
			b.EndsExpired.Add(k)
			b.Creates[k] = u.Relationship
		}
		if err := b.Inserts.Add(u.Relationship); err != nil {
			return nil, &store.InvalidUpdateError{Update: u, Reason: err.Error()}
		}
	}
	return b, nil
}

// PageSize is how many rows one statement of a query reads. Pages are read whole
// before their items are yielded, so no connection is held while a caller works.
const PageSize = 1000

// FetchPage reads at most n relationships after the key after (nil: from the start).
type FetchPage func(ctx context.Context, after *rel.Key, n int) ([]rel.Relationship, error)

// Pages yields the results of a query in key order, reading them a page at a time,
// with a cursor for each item. opts.After is decoded with codec.
func Pages(ctx context.Context, codec store.CursorCodec, opts store.QueryOptions, fetch FetchPage) iter.Seq2[store.Item, error] {
	return func(yield func(store.Item, error) bool) {
		var after *rel.Key
		if opts.After != "" {
			k, err := codec.Decode(opts.After)
			if err != nil {
				yield(store.Item{}, err)
				return
			}
			after = &k
		}
		remaining := opts.Limit
		for {
			n := PageSize
			if opts.Limit > 0 && remaining < n {
				n = remaining
			}
			page, err := fetch(ctx, after, n)
			if err != nil {
				yield(store.Item{}, err)
				return
			}
			for _, r := range page {
				if err := ctx.Err(); err != nil {
					yield(store.Item{}, err)
					return
				}
				k := r.Key()
				if !yield(store.NewItem(r, codec), nil) {
					return
				}
				after = &k
			}
			remaining -= len(page)
			if len(page) < n || (opts.Limit > 0 && remaining <= 0) {
				return
			}
		}
	}
}
