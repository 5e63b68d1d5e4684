package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// replica is a streaming read replica. A replica replays the primary's WAL in commit
// order, so once it shows revision n in latch_revision it holds every row of every
// revision up to n and can serve reads at them exactly as the primary would.
type replica struct {
	pool *pgxpool.Pool
	// head is the newest revision the replica was seen to have replayed.
	head atomic.Uint64
	// checked is when head was last read (unix nanoseconds), to bound how often a
	// lagging replica is asked again.
	checked atomic.Int64
	// pages counts the pages the replica served (ReadStats).
	pages atomic.Uint64
}

// replicaRecheck is how long a replica that had not reached a revision is left alone.
const replicaRecheck = 5 * time.Millisecond

// reached reports whether r has replayed rev, asking it at most every replicaRecheck.
func (r *replica) reached(ctx context.Context, rev store.Revision) bool {
	if uint64(rev) <= r.head.Load() {
		return true
	}
	now := time.Now().UnixNano()
	last := r.checked.Load()
	if now-last < int64(replicaRecheck) || !r.checked.CompareAndSwap(last, now) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var head int64
	if err := r.pool.QueryRow(ctx, "SELECT rev FROM latch_revision").Scan(&head); err != nil {
		return false
	}
	for cur := r.head.Load(); uint64(head) > cur && !r.head.CompareAndSwap(cur, uint64(head)); cur = r.head.Load() {
	}
	return rev <= store.Revision(head)
}

// primary is the primary's read pool.
func (s *Store) primary() poolQuerier { return poolQuerier{pool: s.reads, pages: &s.primaryPages} }

// readQuerier picks where reads at rev go: the next replica that has reached rev, or
// the primary's read pool.
func (s *Store) readQuerier(ctx context.Context, rev store.Revision) querier {
	primary := s.primary()
	n := len(s.replicas)
	if n == 0 {
		return primary
	}
	start := int(s.nextReplica.Add(1))
	for i := range n {
		r := s.replicas[(start+i)%n]
		if r.reached(ctx, rev) {
			return replicaQuerier{r: r, primary: primary}
		}
	}
	return primary
}

// replicaQuerier reads from a replica and falls back to the primary when the replica
// fails (it went away, or cancelled the statement in a recovery conflict).
type replicaQuerier struct {
	r       *replica
	primary poolQuerier
}

func (q replicaQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return fallbackRow{q: q, ctx: ctx, sql: sql, args: args}
}

type fallbackRow struct {
	q    replicaQuerier
	ctx  context.Context
	sql  string
	args []any
}

func (f fallbackRow) Scan(dest ...any) error {
	err := f.q.r.pool.QueryRow(f.ctx, f.sql, f.args...).Scan(dest...)
	if err == nil || errors.Is(err, pgx.ErrNoRows) || f.ctx.Err() != nil {
		return err
	}
	return f.q.primary.QueryRow(f.ctx, f.sql, f.args...).Scan(dest...)
}

func (q replicaQuerier) page(ctx context.Context, sql string, args []any, retainedRev store.Revision) ([]rel.Relationship, error) {
	out, err := poolQuerier{pool: sqlstore.Pool{Pool: q.r.pool}, pages: &q.r.pages}.page(ctx, sql, args, retainedRev)
	if err == nil {
		return out, nil
	}
	if ctx.Err() != nil || errors.Is(err, store.ErrRevisionGone) {
		return nil, err
	}
	q.r.head.Store(0) // ask it again before trusting it
	return q.primary.page(ctx, sql, args, retainedRev)
}

// ReadStats counts the pages read at a revision from the primary and from the replicas
// (store.Replicated).
func (s *Store) ReadStats() store.ReadStats {
	st := store.ReadStats{Primary: s.primaryPages.Load()}
	for _, r := range s.replicas {
		st.Replica += r.pages.Load()
	}
	return st
}
