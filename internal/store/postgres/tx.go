package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// txMode says when a write takes the revision counter's lock.
type txMode int

const (
	// optimistic writes do their work first and lock only to commit; their
	// preconditions and validator are checked again if the head moved meanwhile.
	optimistic txMode = iota
	// lockFirst writes lock before anything else, so their base is exactly the
	// revision below their own. Used by writes whose effect depends on everything
	// that matches a filter (filtered deletes) and by schema writes.
	lockFirst
)

// maxAttempts bounds how often a write that lost a race is run again.
const maxAttempts = 20

// errRace marks a statement that lost a race with a concurrent writer (a unique key
// taken after the write checked for it); the transaction is run again.
var errRace = errors.New("lost a race with a concurrent write")

// writeTx is one attempt of a write transaction.
type writeTx struct {
	s    *Store
	tx   pgx.Tx
	mu   sync.Mutex // serializes statements on tx: validators may read concurrently
	base *reader    // reads at the revision the write started from, inside tx
	// recheck, when set, is run at the revision just below the write's own when other
	// writes committed after the base.
	recheck func(ctx context.Context, r store.Reader) error
}

func (w *writeTx) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tx.Exec(ctx, sql, args...)
}

func (w *writeTx) querier() txQuerier { return txQuerier{sqlstore.LockedTx{Mu: &w.mu, Tx: w.tx}} }

// readerAt returns a reader at rev that runs inside the transaction.
func (w *writeTx) readerAt(ctx context.Context, rev store.Revision) (*reader, error) {
	snap, err := w.s.snapshotAt(ctx, w.querier(), rev)
	if err != nil {
		return nil, err
	}
	return &reader{s: w.s, q: w.querier(), rev: rev, snap: snap}, nil
}

// runTx runs body in a write transaction and commits it as a new revision, running
// it again when it lost a race with another writer. idempotent says whether the write
// may be repeated safely should its commit's outcome stay unknown (store.Idempotent).
func (s *Store) runTx(ctx context.Context, mode txMode, idempotent bool, body func(context.Context, *writeTx) error) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for attempt := 1; ; attempt++ {
		rev, err := s.tryTx(ctx, mode, idempotent, body)
		if err == nil || attempt == maxAttempts || !(sqlstore.Retryable(err) || errors.Is(err, errRace)) {
			return rev, err
		}
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 7)))
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

func (s *Store) tryTx(ctx context.Context, mode txMode, idempotent bool, body func(context.Context, *writeTx) error) (store.Revision, error) {
	tx, err := s.writes.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: beginning a write", err)
	}
	defer rollback(tx)
	w := &writeTx{s: s, tx: tx}
	rev, err := w.start(ctx, mode)
	if err != nil {
		return 0, err
	}
	if err := body(ctx, w); err != nil {
		return 0, err
	}
	if mode == optimistic {
		if rev, err = w.lockAndRecheck(ctx); err != nil {
			return 0, err
		}
	}
	xid, err := record(ctx, tx, rev)
	if err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: recording the revision", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.commitOutcome(rev, xid, idempotent, sqlstore.Classify(ctx, "postgres: committing", err))
	}
	return rev, nil
}

// commitProbeTime bounds how long a write whose commit lost its connection waits for
// the server to say whether the commit took effect.
const commitProbeTime = 10 * time.Second

// commitOutcome decides a write whose COMMIT failed. A commit refused by the server
// (a serialization failure, say) wrote nothing. One that lost its connection, or its
// client, may have been applied before the answer was lost: the server is asked, on a
// new connection, what became of the transaction (pg_xact_status knows after the
// session is gone). Committed, the write succeeded at rev; aborted, nothing was written;
// unknown (the server stays unreachable), store.OutcomeUnknown says whether the write
// may be repeated.
func (s *Store) commitOutcome(rev store.Revision, xid uint64, idempotent bool, commitErr error) (store.Revision, error) {
	if !errors.Is(commitErr, store.ErrUnavailable) && !errors.Is(commitErr, context.Canceled) && !errors.Is(commitErr, context.DeadlineExceeded) {
		return 0, commitErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.commitProbe)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var status *string
		err := s.writes.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(xid, 10)).Scan(&status)
		switch {
		case err == nil && status != nil && *status == "committed":
			return rev, nil
		case err == nil && status != nil && *status == "aborted":
			return 0, commitErr
		case err == nil && status == nil:
			// Too old to be known: cannot happen this soon after the commit, but it
			// decides nothing.
			return 0, store.OutcomeUnknown(idempotent, commitErr)
		}
		// Unreachable, or still in progress: ask again until the probe time runs out.
		select {
		case <-ctx.Done():
			return 0, store.OutcomeUnknown(idempotent, commitErr)
		case <-time.After(wait):
		}
	}
}

// start sets up the base reader. A lockFirst write locks the counter now and returns
// its revision; an optimistic one bases itself on the head and returns 0.
func (w *writeTx) start(ctx context.Context, mode txMode) (store.Revision, error) {
	var rev, base store.Revision
	if mode == lockFirst {
		var err error
		if rev, err = lock(ctx, w.tx); err != nil {
			return 0, sqlstore.Classify(ctx, "postgres: locking the revision counter", err)
		}
		base = rev - 1
	} else {
		var head int64
		if err := w.tx.QueryRow(ctx, "SELECT rev FROM latch_revision").Scan(&head); err != nil {
			return 0, sqlstore.Classify(ctx, "postgres: reading the head revision", err)
		}
		base = store.Revision(head)
	}
	var err error
	w.base, err = w.readerAt(ctx, base)
	return rev, err
}

// lockAndRecheck takes the counter lock for an optimistic write and, when other
// writes committed since its base, checks it again at the revision just below its own.
func (w *writeTx) lockAndRecheck(ctx context.Context) (store.Revision, error) {
	rev, err := lock(ctx, w.tx)
	if err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: locking the revision counter", err)
	}
	if rev-1 == w.base.rev || w.recheck == nil {
		return rev, nil
	}
	r, err := w.readerAt(ctx, rev-1)
	if err != nil {
		return 0, err
	}
	return rev, w.recheck(ctx, r)
}

// rollback ends tx if it is still open. It runs on its own short context so that a
// cancelled request still releases its connection cleanly.
func rollback(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx) // after Commit this is a no-op; otherwise the conn is closed on failure
}
