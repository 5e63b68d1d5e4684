package crdb

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

const keysFrom = `unnest($1::STRING[], $2::STRING[], $3::STRING[], $4::STRING[], $5::STRING[], $6::STRING[]) AS u(rt, ri, rl, st, si, sr)`

const keyTuple = `(resource_type, resource_id, relation, subject_type, subject_id, subject_relation)`

// liveCreatedSQL finds a created key with an unexpired row.
const liveCreatedSQL = `SELECT r.resource_type, r.resource_id, r.relation, r.subject_type, r.subject_id, r.subject_relation
	FROM latch_relationships AS r JOIN ` + keysFrom + ` ON r.resource_type = u.rt AND r.resource_id = u.ri
	AND r.relation = u.rl AND r.subject_type = u.st AND r.subject_id = u.si AND r.subject_relation = u.sr
	WHERE r.expiration IS NULL OR r.expiration > $7 LIMIT 1`

const deleteKeysSQL = `DELETE FROM latch_relationships WHERE ` + keyTuple + ` IN (SELECT * FROM ` + keysFrom + `)`

// upsertSQL writes creates and touches: a create over an expired row replaces it.
const upsertSQL = `UPSERT INTO latch_relationships
	(resource_type, resource_id, relation, subject_type, subject_id, subject_relation, caveat_name, caveat_context, expiration)
	SELECT rt, ri, rl, st, si, sr, cn, cc::JSONB, ex FROM unnest($1::STRING[], $2::STRING[], $3::STRING[], $4::STRING[],
		$5::STRING[], $6::STRING[], $7::STRING[], $8::STRING[], $9::TIMESTAMPTZ[]) AS u(rt, ri, rl, st, si, sr, cn, cc, ex)`

const maxAttempts = 20

// writeTx is one attempt of a write transaction.
type writeTx struct {
	s    *Store
	tx   pgx.Tx
	mu   sync.Mutex
	base *reader // reads the state the write commits over
}

func (w *writeTx) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tag, err := w.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// runTx runs body in a SERIALIZABLE transaction committed at the revision it returns,
// running it again on retry errors (SQLSTATE 40001). idempotent says whether the write
// may be repeated safely should its commit's outcome stay unknown (store.Idempotent).
func (s *Store) runTx(ctx context.Context, idempotent bool, body func(context.Context, *writeTx) error) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for attempt := 1; ; attempt++ {
		rev, err := s.tryTx(ctx, idempotent, body)
		if err == nil || attempt == maxAttempts || !sqlstore.Retryable(err) {
			if err == nil {
				s.sawHead(rev)
			}
			return rev, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 7)))):
		}
	}
}

func (s *Store) tryTx(ctx context.Context, idempotent bool, body func(context.Context, *writeTx) error) (store.Revision, error) {
	tx, err := s.writes.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return 0, sqlstore.Classify(ctx, "cockroachdb: beginning a write", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	w := &writeTx{s: s, tx: tx}
	// Reading the timestamp first fixes it: the transaction commits at rev or retries.
	rev, err := clusterRevision(ctx, lockedTx{sqlstore.LockedTx{Mu: &w.mu, Tx: tx}})
	if err != nil {
		return 0, err
	}
	w.base = &reader{s: s, q: lockedTx{sqlstore.LockedTx{Mu: &w.mu, Tx: tx}}, rev: rev - 1}
	if err := body(ctx, w); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, commitError(ctx, idempotent, err)
	}
	return rev, nil
}

// commitError classifies a failed COMMIT. CockroachDB reports a commit whose outcome
// it does not know (the node coordinating it went away) as an ambiguous result,
// SQLSTATE 40003; a connection lost at the commit leaves the outcome as unknown.
// Neither can be looked up afterwards, so store.OutcomeUnknown says whether the write
// may be repeated; any other failure wrote nothing.
func commitError(ctx context.Context, idempotent bool, err error) error {
	classified := sqlstore.Classify(ctx, "cockroachdb: committing", err)
	if sqlstore.SQLState(err) == "40003" || errors.Is(classified, store.ErrUnavailable) {
		return store.OutcomeUnknown(idempotent, classified)
	}
	return classified
}

// Write applies updates atomically as one new revision.
func (s *Store) Write(ctx context.Context, preconditions []store.Precondition, updates []store.Update, validate store.Validator) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckUpdates(updates); err != nil {
		return 0, err
	}
	b, err := sqlstore.SplitUpdates(updates)
	if err != nil {
		return 0, err
	}
	return s.runTx(ctx, store.Idempotent(preconditions, updates), func(ctx context.Context, w *writeTx) error {
		if err := store.CheckPreconditions(ctx, w.base, preconditions); err != nil {
			return err
		}
		if validate != nil {
			if err := validate(ctx, w.base); err != nil {
				return err
			}
		}
		return w.apply(ctx, b)
	})
}

func (w *writeTx) apply(ctx context.Context, b *sqlstore.Batch) error {
	if b.EndsExpired.Len() > 0 {
		var k rel.Key
		err := w.base.q.QueryRow(ctx, liveCreatedSQL, append(b.EndsExpired.Args(), w.s.opts.Now())...).Scan(
			&k.ResourceType, &k.ResourceID, &k.Relation, &k.SubjectType, &k.SubjectID, &k.SubjectRelation)
		if err == nil {
			return &store.AlreadyExistsError{Relationship: b.Creates[k]}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return sqlstore.Classify(ctx, "cockroachdb: checking created relationships", err)
		}
	}
	if b.Deletes.Len() > 0 { // touches are upserted, not deleted
		if _, err := w.exec(ctx, deleteKeysSQL, b.Deletes.Args()...); err != nil {
			return sqlstore.Classify(ctx, "cockroachdb: deleting relationships", err)
		}
	}
	if b.Inserts.Len() > 0 {
		if _, err := w.exec(ctx, upsertSQL, b.Inserts.Args()...); err != nil {
			return sqlstore.Classify(ctx, "cockroachdb: writing relationships", err)
		}
	}
	return nil
}

// DeleteByFilter deletes the relationships matching f, at most limit of them.
func (s *Store) DeleteByFilter(ctx context.Context, preconditions []store.Precondition, f store.Filter, limit int, partial bool) (store.Revision, int, bool, error) {
	var deleted int
	var more bool
	rev, err := s.runTx(ctx, store.DeleteIdempotent(preconditions, limit, partial), func(ctx context.Context, w *writeTx) error {
		if err := store.CheckPreconditions(ctx, w.base, preconditions); err != nil {
			return err
		}
		var keys sqlstore.KeyArrays
		opts := store.QueryOptions{}
		if limit > 0 {
			opts.Limit = limit + 1
		}
		for item, err := range w.base.Query(ctx, f, opts) {
			if err != nil {
				return err
			}
			keys.Add(item.Relationship.Key())
		}
		deleted, more = keys.Len(), false
		if limit > 0 && keys.Len() > limit {
			if !partial {
				return store.ErrTooManyToDelete
			}
			deleted, more = limit, true
		}
		keys = keys.Prefix(deleted)
		if deleted == 0 {
			return nil
		}
		_, err := w.exec(ctx, deleteKeysSQL, keys.Args()...)
		return sqlstore.Classify(ctx, "cockroachdb: deleting "+f.String(), err)
	})
	if err != nil {
		return 0, 0, false, err
	}
	return rev, deleted, more, nil
}

// WriteSchema stores text as the schema from a new revision on.
func (s *Store) WriteSchema(ctx context.Context, text string, validate store.Validator) (store.Revision, error) {
	return s.runTx(ctx, true, func(ctx context.Context, w *writeTx) error {
		if validate != nil {
			if err := validate(ctx, w.base); err != nil {
				return err
			}
		}
		_, err := w.exec(ctx, "UPSERT INTO latch_schema (singleton, text) VALUES (true, $1)", text)
		return sqlstore.Classify(ctx, "cockroachdb: writing the schema", err)
	})
}

var copyColumns = []string{
	"resource_type", "resource_id", "relation", "subject_type", "subject_id",
	"subject_relation", "caveat_name", "caveat_context", "expiration",
}

// BulkLoad creates every relationship rels yields with COPY in one transaction; it
// fails whole when one exists or is yielded twice. It is not retried: rels is
// consumed once.
func (s *Store) BulkLoad(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) (store.Revision, error) {
	var rev store.Revision
	_, err := s.tryTx(ctx, false, func(ctx context.Context, w *writeTx) error {
		rev = w.base.rev + 1
		next, stop := iter.Pull2(rels)
		defer stop()
		var srcErr error
		src := pgx.CopyFromFunc(func() ([]any, error) {
			r, err, ok := next()
			if !ok {
				return nil, nil
			}
			if err == nil && r.Caveat != nil && r.Caveat.Name == "" {
				err = &store.InvalidUpdateError{Update: store.Update{Op: store.Create, Relationship: r}, Reason: "caveat has no name"}
			}
			var row []any
			if err == nil {
				row, err = sqlstore.CopyRow(r)
			}
			srcErr = err
			return row, err
		})
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, err := w.tx.CopyFrom(ctx, pgx.Identifier{"latch_relationships"}, copyColumns, src); err != nil {
			if srcErr != nil {
				return fmt.Errorf("cockroachdb: bulk load: %w", srcErr)
			}
			return sqlstore.Classify(ctx, "cockroachdb: bulk load", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.sawHead(rev)
	return rev, nil
}
