package postgres

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// querier runs the statements of a reader: on a pool, or on a write transaction's
// connection.
type querier interface {
	// page runs a query of relationships. When retainedRev is not zero it also checks,
	// after the query, that the revision's transaction row still exists.
	page(ctx context.Context, sql string, args []any, retainedRev store.Revision) ([]rel.Relationship, error)
	sqlstore.QueryRower
}

// poolQuerier reads from a pool, counting the pages it served in pages.
type poolQuerier struct {
	pool  sqlstore.Pool
	pages *atomic.Uint64
}

func (q poolQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return q.pool.QueryRow(ctx, sql, args...)
}

func (q poolQuerier) page(ctx context.Context, sql string, args []any, retainedRev store.Revision) ([]rel.Relationship, error) {
	out, err := q.query(ctx, sql, args, retainedRev)
	if err == nil {
		q.pages.Add(1)
	}
	return out, err
}

func (q poolQuerier) query(ctx context.Context, sql string, args []any, retainedRev store.Revision) ([]rel.Relationship, error) {
	if retainedRev == 0 {
		rows, err := q.pool.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return sqlstore.CollectRelationships(rows)
	}
	// The retention check runs after the page in the same round trip: if the revision
	// is still retained then, the collector had not started deleting its rows when
	// the page's statement took its snapshot.
	var b pgx.Batch
	b.Queue(sql, args...)
	b.Queue("SELECT EXISTS (SELECT 1 FROM latch_transactions WHERE rev = $1)", int64(retainedRev))
	br := q.pool.SendBatch(ctx, &b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out, err := sqlstore.CollectRelationships(rows)
	if err != nil {
		return nil, err
	}
	var retained bool
	if err := br.QueryRow().Scan(&retained); err != nil {
		return nil, err
	}
	if !retained {
		return nil, fmt.Errorf("postgres: revision %d was collected during the read: %w", retainedRev, store.ErrRevisionGone)
	}
	return out, nil
}

// txQuerier reads inside a write transaction.
type txQuerier struct{ sqlstore.LockedTx }

func (q txQuerier) page(ctx context.Context, sql string, args []any, _ store.Revision) ([]rel.Relationship, error) {
	return q.Page(ctx, sql, args)
}

// reader reads at one revision.
type reader struct {
	s             *Store
	q             querier
	rev           store.Revision
	snap          snapshot
	checkRetained bool
}

func (r *reader) Revision() store.Revision { return r.rev }

// Query yields the relationships matching f, a page per statement.
func (r *reader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	now := r.s.opts.Now()
	retained := store.Revision(0)
	if r.checkRetained {
		retained = r.rev
	}
	fetch := func(ctx context.Context, after *rel.Key, n int) ([]rel.Relationship, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sql, args := selectPage(f, r.snap, now, after, n)
		page, err := r.q.page(ctx, sql, args, retained)
		if err != nil {
			return nil, sqlstore.Classify(ctx, "postgres: query "+f.String(), err)
		}
		return page, nil
	}
	return sqlstore.Pages(ctx, store.NewCursorCodec(f), opts, fetch)
}

// selectPage builds the statement reading at most limit relationships matching f
// after the key after (nil: from the start), as visible in snap.
func selectPage(f store.Filter, snap snapshot, now time.Time, after *rel.Key, limit int) (string, []any) {
	var a sqlstore.Args
	sel := sqlstore.Select{Table: "latch_relationships", Extra: snap.visibility(&a), Filter: f, Now: now, Limit: limit}
	return sel.Build(&a, after), a.Values
}

// Schema returns the schema text at the reader's revision.
func (r *reader) Schema(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var a sqlstore.Args
	sql := "SELECT text FROM latch_schema WHERE " + sqlstore.And(r.snap.visibility(&a)) + " LIMIT 1"
	var text string
	err := r.q.QueryRow(ctx, sql, a.Values...).Scan(&text)
	if isNoRows(err) {
		return "", nil
	}
	if err != nil {
		return "", sqlstore.Classify(ctx, "postgres: reading the schema", err)
	}
	return text, nil
}
