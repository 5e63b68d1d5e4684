package postgres

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// watchBatch bounds the revisions one poll of a watch reads.
const watchBatch = 100

// watchPoll is how often a watch that has caught up looks for new revisions. Other
// processes write to the same database, so there is nothing local to wait on.
var watchPoll = 100 * time.Millisecond

// Watch streams the changes committed after revision after (see store.Watcher).
//
// Each watcher polls the database: one read-only REPEATABLE READ transaction per step
// lists the next revisions from latch_transactions and finds their touches (rows whose
// created_xid is the revision's xid) and deletes (rows whose deleted_xid is). Revision
// numbers follow commit order (the counter's row lock is held until commit), so the
// revisions a snapshot sees form an unbroken run: no revision is emitted before every
// earlier one is visible. The step also requires the watcher's own position to be
// still listed, which proves the collector has not removed rows of the revisions read.
// A revision with a huge number of changes (a bulk import) is read in one step.
func (s *Store) Watch(ctx context.Context, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	if _, err := s.snapshotAt(ctx, s.reads, after); err != nil {
		return func(yield func(store.Change, error) bool) { yield(store.Change{}, err) }
	}
	return changefeed.Watch(ctx, s.watchNext, after, opts, watchPoll)
}

func (s *Store) watchNext(ctx context.Context, after store.Revision) (changefeed.Step, error) {
	var step changefeed.Step
	err := pgx.BeginTxFunc(ctx, s.reads, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		step, err = readChanges(ctx, tx, after)
		return err
	})
	if err != nil {
		return changefeed.Step{}, sqlstore.Classify(ctx, fmt.Sprintf("postgres: watching after revision %d", after), err)
	}
	return step, nil
}

// readChanges reads, in one snapshot, the changes of up to watchBatch revisions after
// after.
func readChanges(ctx context.Context, tx pgx.Tx, after store.Revision) (changefeed.Step, error) {
	through, more, err := nextRevisions(ctx, tx, after)
	if err != nil || through == after {
		return changefeed.Step{Through: after}, err
	}
	byRev := map[store.Revision][]store.RelationshipChange{}
	touched := map[revKey]bool{}
	err = scanChanges(ctx, tx, "r.created_xid = t.xid", after, through, func(rev store.Revision, r rel.Relationship) {
		byRev[rev] = append(byRev[rev], store.RelationshipChange{Op: store.ChangeTouch, Relationship: r})
		touched[revKey{rev, r.Key()}] = true
	})
	if err != nil {
		return changefeed.Step{}, err
	}
	err = scanChanges(ctx, tx, "r.deleted_xid = t.xid AND r.deleted_xid <> "+maxXID, after, through, func(rev store.Revision, r rel.Relationship) {
		if !touched[revKey{rev, r.Key()}] { // else a touch replaced the row
			byRev[rev] = append(byRev[rev], store.RelationshipChange{Op: store.ChangeDelete, Relationship: r})
		}
	})
	if err != nil {
		return changefeed.Step{}, err
	}
	schema, err := schemaRevisions(ctx, tx, after, through)
	if err != nil {
		return changefeed.Step{}, err
	}
	return changefeed.Step{Changes: changefeed.Assemble(byRev, schema), Through: through, More: more}, nil
}

type revKey struct {
	rev store.Revision
	key rel.Key
}

// nextRevisions returns the newest revision of the next batch after after, and
// whether more follow. It fails with ErrRevisionGone when after itself is no longer
// listed (the collector forgot it) and ErrRevisionInFuture when it is past the head.
func nextRevisions(ctx context.Context, tx pgx.Tx, after store.Revision) (store.Revision, bool, error) {
	rows, err := tx.Query(ctx, "SELECT rev FROM latch_transactions WHERE rev >= $1 ORDER BY rev LIMIT $2", int64(after), watchBatch+2)
	if err != nil {
		return 0, false, err
	}
	revs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, false, err
	}
	if len(revs) == 0 || revs[0] != int64(after) {
		var head int64
		if err := tx.QueryRow(ctx, "SELECT rev FROM latch_revision").Scan(&head); err != nil {
			return 0, false, err
		}
		if int64(after) > head {
			return 0, false, fmt.Errorf("postgres: revision %d (head is %d): %w", after, head, store.ErrRevisionInFuture)
		}
		return 0, false, fmt.Errorf("postgres: watching after revision %d: %w", after, store.ErrRevisionGone)
	}
	for i, rev := range revs {
		if rev != int64(after)+int64(i) {
			return 0, false, fmt.Errorf("postgres: revision %d is missing from latch_transactions: %w", int64(after)+int64(i), store.ErrRevisionGone)
		}
	}
	n := min(len(revs)-1, watchBatch)
	return after + store.Revision(n), len(revs)-1 > watchBatch, nil
}

// scanChanges calls add for each row joined to a revision in (after, through] by on.
func scanChanges(ctx context.Context, tx pgx.Tx, on string, after, through store.Revision, add func(store.Revision, rel.Relationship)) error {
	rows, err := tx.Query(ctx, "SELECT t.rev, "+sqlstore.SelectColumns+` FROM latch_transactions t
		JOIN latch_relationships r ON `+on+` WHERE t.rev > $1 AND t.rev <= $2`, int64(after), int64(through))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rev int64
		r, err := sqlstore.ScanRelationship(revRow{rows, &rev})
		if err != nil {
			return err
		}
		add(store.Revision(rev), r)
	}
	return rows.Err()
}

// revRow scans a leading revision column, then hands the rest to a relationship scan.
type revRow struct {
	pgx.Row
	rev *int64
}

func (r revRow) Scan(dest ...any) error { return r.Row.Scan(append([]any{r.rev}, dest...)...) }

// schemaRevisions returns the revisions in (after, through] that wrote the schema.
func schemaRevisions(ctx context.Context, tx pgx.Tx, after, through store.Revision) (map[store.Revision]bool, error) {
	rows, err := tx.Query(ctx, `SELECT t.rev FROM latch_transactions t JOIN latch_schema sc ON sc.created_xid = t.xid
		WHERE t.rev > $1 AND t.rev <= $2`, int64(after), int64(through))
	if err != nil {
		return nil, err
	}
	revs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	out := make(map[store.Revision]bool, len(revs))
	for _, rev := range revs {
		out[store.Revision(rev)] = true
	}
	return out, nil
}

var _ store.Watcher = (*Store)(nil)
