package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// collect runs GC every GCInterval until Close.
func (s *Store) collect() {
	defer close(s.done)
	t := time.NewTicker(s.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-s.stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		if _, err := s.GC(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("postgres garbage collection failed", "err", err)
		}
		cancel()
	}
}

// GCResult says what one collection removed.
type GCResult struct {
	Horizon       store.Revision // the oldest revision still readable
	Revisions     int            // revisions forgotten
	Relationships int            // relationship rows deleted
}

// GC forgets the revisions older than the GC window, except the newest of them, and
// deletes the rows that no retained revision can see, in batches of GCBatch rows.
func (s *Store) GC(ctx context.Context) (GCResult, error) {
	var res GCResult
	var horizon int64
	var xid, snap string
	err := s.writes.QueryRow(ctx, `SELECT rev, xid::text, snapshot::text FROM latch_transactions
		WHERE committed_at <= clock_timestamp() - $1 * interval '1 microsecond'
		ORDER BY committed_at DESC LIMIT 1`, s.opts.GCWindow.Microseconds()).Scan(&horizon, &xid, &snap)
	if isNoRows(err) {
		return res, nil
	}
	if err != nil {
		return res, sqlstore.Classify(ctx, "postgres: finding the GC horizon", err)
	}
	res.Horizon = store.Revision(horizon)
	// Revisions go first: a reader of a forgotten revision fails (ErrRevisionGone)
	// before any row it could see is deleted.
	res.Revisions, err = s.deleteBatches(ctx, "forgetting revisions", `DELETE FROM latch_transactions WHERE rev IN
		(SELECT rev FROM latch_transactions WHERE rev < $1 ORDER BY rev LIMIT $2)`, horizon)
	if err != nil {
		return res, err
	}
	s.raiseOldest(uint64(horizon))
	// Rows ended by a transaction below the horizon snapshot's xmin, or by the
	// horizon's own write, are invisible at every retained revision. Rows ended by
	// other transactions the horizon sees are collected once the horizon moves on.
	n, err := s.deleteBatches(ctx, "deleting ended relationships", `DELETE FROM latch_relationships WHERE ctid IN
		(SELECT ctid FROM latch_relationships WHERE deleted_xid <> `+maxXID+`
		AND deleted_xid < pg_snapshot_xmin($1::pg_snapshot) LIMIT $2)`, snap)
	res.Relationships += n
	if err != nil {
		return res, err
	}
	n, err = s.deleteBatches(ctx, "deleting ended relationships", `DELETE FROM latch_relationships WHERE ctid IN
		(SELECT ctid FROM latch_relationships WHERE deleted_xid = $1::xid8 LIMIT $2)`, xid)
	res.Relationships += n
	if err != nil {
		return res, err
	}
	_, err = s.writes.Exec(ctx, `DELETE FROM latch_schema WHERE deleted_xid <> `+maxXID+`
		AND (deleted_xid < pg_snapshot_xmin($1::pg_snapshot) OR deleted_xid = $2::xid8)`, snap, xid)
	return res, sqlstore.Classify(ctx, "postgres: deleting ended schemas", err)
}

// deleteBatches runs a DELETE of at most GCBatch rows (its $2) until one deletes fewer.
func (s *Store) deleteBatches(ctx context.Context, what, sql string, arg any) (int, error) {
	total := 0
	for {
		tag, err := s.writes.Exec(ctx, sql, arg, s.opts.GCBatch)
		if err != nil {
			return total, sqlstore.Classify(ctx, "postgres: GC "+what, err)
		}
		total += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(s.opts.GCBatch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("postgres: GC %s: %w", what, err)
		}
	}
}

// raiseOldest records that revisions below rev are gone.
func (s *Store) raiseOldest(rev uint64) {
	for {
		cur := s.oldest.Load()
		if rev <= cur || s.oldest.CompareAndSwap(cur, rev) {
			return
		}
	}
}
