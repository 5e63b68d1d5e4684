package postgres

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// snapshot is what a revision means to PostgreSQL: the xid of the write that made it
// and the snapshot that write took just before committing (both as text, the form
// PostgreSQL parses once per statement).
type snapshot struct {
	xid  string // xid8
	snap string // pg_snapshot, "xmin:xmax:xip,..."
}

// visibility returns the conditions selecting the rows visible at s, with s's
// parameters added to a.
func (s snapshot) visibility(a *sqlstore.Args) []string {
	x, sn := a.Add(s.xid)+"::xid8", a.Add(s.snap)+"::pg_snapshot"
	return []string{
		"(created_xid = " + x + " OR pg_visible_in_snapshot(created_xid, " + sn + "))",
		"NOT (deleted_xid = " + x + " OR pg_visible_in_snapshot(deleted_xid, " + sn + "))",
	}
}

// snapshotCache remembers the snapshots of recent revisions; they never change.
type snapshotCache struct {
	mu   sync.Mutex
	m    map[store.Revision]snapshot // guarded by mu
	ring []store.Revision            // guarded by mu; insertion order, for eviction
	next int                         // guarded by mu
}

func newSnapshotCache(size int) *snapshotCache {
	return &snapshotCache{m: make(map[store.Revision]snapshot, size), ring: make([]store.Revision, size)}
}

func (c *snapshotCache) get(rev store.Revision) (snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[rev]
	return s, ok
}

func (c *snapshotCache) put(rev store.Revision, s snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[rev]; ok {
		return
	}
	if old := c.ring[c.next]; old != 0 {
		delete(c.m, old)
	}
	c.ring[c.next] = rev
	c.next = (c.next + 1) % len(c.ring)
	c.m[rev] = s
}

// snapshotAt returns rev's snapshot, reading it with q when it is not cached. It fails
// with ErrRevisionInFuture past the head and ErrRevisionGone below the oldest retained
// revision.
func (s *Store) snapshotAt(ctx context.Context, q sqlstore.QueryRower, rev store.Revision) (snapshot, error) {
	if rev < store.Revision(s.oldest.Load()) || rev == 0 {
		return snapshot{}, fmt.Errorf("postgres: revision %d: %w", rev, store.ErrRevisionGone)
	}
	if snap, ok := s.snaps.get(rev); ok {
		return snap, nil
	}
	var head int64
	var xid, snap *string
	err := q.QueryRow(ctx, `SELECT r.rev, t.xid::text, t.snapshot::text
		FROM latch_revision r LEFT JOIN latch_transactions t ON t.rev = $1`, int64(rev)).Scan(&head, &xid, &snap)
	if err != nil {
		return snapshot{}, sqlstore.Classify(ctx, fmt.Sprintf("postgres: reading revision %d", rev), err)
	}
	switch {
	case int64(rev) > head:
		return snapshot{}, fmt.Errorf("postgres: revision %d (head is %d): %w", rev, head, store.ErrRevisionInFuture)
	case xid == nil:
		return snapshot{}, fmt.Errorf("postgres: revision %d: %w", rev, store.ErrRevisionGone)
	}
	out := snapshot{xid: *xid, snap: *snap}
	s.snaps.put(rev, out)
	return out, nil
}

// Reader reads at rev, from a replica that has reached it or from the primary.
func (s *Store) Reader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	return s.reader(ctx, rev, true)
}

// PrimaryReader reads at rev from the primary alone (store.Replicated).
func (s *Store) PrimaryReader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	return s.reader(ctx, rev, false)
}

func (s *Store) reader(ctx context.Context, rev store.Revision, replicas bool) (store.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap, err := s.snapshotAt(ctx, s.reads, rev)
	if err != nil {
		return nil, err
	}
	var q querier = s.primary()
	if replicas {
		q = s.readQuerier(ctx, rev)
	}
	return &reader{s: s, q: q, rev: rev, snap: snap, checkRetained: true}, nil
}

// lock takes the revision counter's row lock for the rest of tx and returns the
// revision tx will commit as. Writers hold it only from here to their commit.
func lock(ctx context.Context, tx pgx.Tx) (store.Revision, error) {
	var rev int64
	if err := tx.QueryRow(ctx, "UPDATE latch_revision SET rev = rev + 1 RETURNING rev").Scan(&rev); err != nil {
		return 0, err
	}
	return store.Revision(rev), nil
}

// record stores rev's xid and snapshot, and returns the xid. It must be a statement of
// its own after lock, so that its snapshot is taken after every earlier revision
// committed.
func record(ctx context.Context, tx pgx.Tx, rev store.Revision) (uint64, error) {
	var xid string
	err := tx.QueryRow(ctx, `INSERT INTO latch_transactions (rev, xid, snapshot, committed_at)
		VALUES ($1, pg_current_xact_id(), pg_current_snapshot(), clock_timestamp()) RETURNING xid::text`, int64(rev)).Scan(&xid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(xid, 10, 64)
}
