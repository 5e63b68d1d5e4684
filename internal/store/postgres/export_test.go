package postgres

import (
	"context"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// QueryRowForTest runs a one-row query on s's write pool.
func QueryRowForTest(s *Store, ctx context.Context, sql string, dest ...any) error {
	return s.writes.QueryRow(ctx, sql).Scan(dest...)
}

// CommitOutcomeForTest decides a write at rev whose commit failed with commitErr, as
// a write does, waiting at most probe for the server's answer.
func CommitOutcomeForTest(s *Store, rev store.Revision, xid uint64, idempotent bool, probe time.Duration, commitErr error) (store.Revision, error) {
	s.commitProbe = probe
	return s.commitOutcome(rev, xid, idempotent, commitErr)
}

// AbortedXIDForTest returns the id of a transaction that was rolled back.
func AbortedXIDForTest(s *Store, ctx context.Context) (string, error) {
	tx, err := s.writes.Begin(ctx)
	if err != nil {
		return "", err
	}
	var xid string
	err = tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&xid)
	if rbErr := tx.Rollback(ctx); err == nil {
		err = rbErr
	}
	return xid, err
}
