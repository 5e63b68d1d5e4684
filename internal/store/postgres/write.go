package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// keysFrom is the join of a batch's keys, passed as six arrays starting at $1.
const keysFrom = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(rt, ri, rl, st, si, sr)`

const keysMatch = `r.resource_type = u.rt AND r.resource_id = u.ri AND r.relation = u.rl
	AND r.subject_type = u.st AND r.subject_id = u.si AND r.subject_relation = u.sr`

// liveCreatedSQL finds a key of the batch with a current, unexpired row.
const liveCreatedSQL = `SELECT r.resource_type, r.resource_id, r.relation, r.subject_type, r.subject_id, r.subject_relation
	FROM ` + keysFrom + ` JOIN latch_relationships r ON ` + keysMatch + `
	WHERE r.deleted_xid = ` + maxXID + ` AND (r.expiration IS NULL OR r.expiration > $7) LIMIT 1`

// endSQL ends the current rows of a batch's keys.
const endSQL = `UPDATE latch_relationships r SET deleted_xid = pg_current_xact_id()
	FROM ` + keysFrom + ` WHERE ` + keysMatch + ` AND r.deleted_xid = ` + maxXID

// endExpiredSQL ends the current rows of a batch's keys that have expired.
const endExpiredSQL = endSQL + ` AND r.expiration <= $7`

const insertSQL = `INSERT INTO latch_relationships
	(resource_type, resource_id, relation, subject_type, subject_id, subject_relation, caveat_name, caveat_context, expiration)
	SELECT rt, ri, rl, st, si, sr, cn, cc::jsonb, ex FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
		$5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[]) AS u(rt, ri, rl, st, si, sr, cn, cc, ex)`

// Write applies updates atomically as one new revision.
func (s *Store) Write(ctx context.Context, preconditions []store.Precondition, updates []store.Update, validate store.Validator) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckUpdates(updates); err != nil {
		return 0, err
	}
	batch, err := sqlstore.SplitUpdates(updates)
	if err != nil {
		return 0, err
	}
	check := func(ctx context.Context, r store.Reader) error {
		if err := store.CheckPreconditions(ctx, r, preconditions); err != nil {
			return err
		}
		if validate != nil {
			return validate(ctx, r)
		}
		return nil
	}
	return s.runTx(ctx, optimistic, store.Idempotent(preconditions, updates), func(ctx context.Context, w *writeTx) error {
		if err := check(ctx, w.base); err != nil {
			return err
		}
		if len(preconditions) > 0 || validate != nil {
			w.recheck = check
		}
		return w.apply(ctx, batch)
	})
}

// apply writes a checked batch: it refuses creates of live relationships, ends the
// rows that deletes, touches and creates over expired relationships replace, and
// inserts the new rows, one statement each.
func (w *writeTx) apply(ctx context.Context, b *sqlstore.Batch) error {
	now := w.s.opts.Now()
	if b.EndsExpired.Len() > 0 {
		if err := w.refuseLive(ctx, b, now); err != nil {
			return err
		}
		if _, err := w.exec(ctx, endExpiredSQL, append(b.EndsExpired.Args(), now)...); err != nil {
			return sqlstore.Classify(ctx, "postgres: ending expired relationships", err)
		}
	}
	if b.Ends.Len() > 0 {
		if _, err := w.exec(ctx, endSQL, b.Ends.Args()...); err != nil {
			return sqlstore.Classify(ctx, "postgres: ending relationships", err)
		}
	}
	if b.Inserts.Len() > 0 {
		_, err := w.exec(ctx, insertSQL, b.Inserts.Args()...)
		if sqlstore.SQLState(err) == "23505" { // a concurrent write made the key live after refuseLive looked
			return fmt.Errorf("postgres: inserting relationships: %w: %w", errRace, err)
		}
		if err != nil {
			return sqlstore.Classify(ctx, "postgres: inserting relationships", err)
		}
	}
	return nil
}

// refuseLive fails with AlreadyExistsError when a created key has a current,
// unexpired row.
func (w *writeTx) refuseLive(ctx context.Context, b *sqlstore.Batch, now any) error {
	var k rel.Key
	err := w.querier().QueryRow(ctx, liveCreatedSQL, append(b.EndsExpired.Args(), now)...).Scan(
		&k.ResourceType, &k.ResourceID, &k.Relation, &k.SubjectType, &k.SubjectID, &k.SubjectRelation)
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return sqlstore.Classify(ctx, "postgres: checking created relationships", err)
	}
	return &store.AlreadyExistsError{Relationship: b.Creates[k]}
}

// DeleteByFilter deletes the relationships matching f at the head, in key order, at
// most limit of them (0: all).
func (s *Store) DeleteByFilter(ctx context.Context, preconditions []store.Precondition, f store.Filter, limit int, partial bool) (store.Revision, int, bool, error) {
	var deleted int
	var more bool
	rev, err := s.runTx(ctx, lockFirst, store.DeleteIdempotent(preconditions, limit, partial), func(ctx context.Context, w *writeTx) error {
		if err := store.CheckPreconditions(ctx, w.base, preconditions); err != nil {
			return err
		}
		var err error
		deleted, more, err = w.deleteMatching(ctx, f, limit, partial)
		return err
	})
	if err != nil {
		return 0, 0, false, err
	}
	return rev, deleted, more, nil
}

// deleteMatching ends the rows matching f. The write holds the counter lock, so the
// current rows are exactly those of its base revision.
func (w *writeTx) deleteMatching(ctx context.Context, f store.Filter, limit int, partial bool) (int, bool, error) {
	now := w.s.opts.Now()
	if limit <= 0 {
		var a sqlstore.Args
		conds := append(sqlstore.FilterConditions(f, now, &a), "deleted_xid = "+maxXID)
		tag, err := w.exec(ctx, "UPDATE latch_relationships SET deleted_xid = pg_current_xact_id() WHERE "+sqlstore.And(conds), a.Values...)
		if err != nil {
			return 0, false, sqlstore.Classify(ctx, "postgres: deleting "+f.String(), err)
		}
		return int(tag.RowsAffected()), false, nil
	}
	var keys sqlstore.KeyArrays
	for item, err := range w.base.Query(ctx, f, store.QueryOptions{Limit: limit + 1}) {
		if err != nil {
			return 0, false, err
		}
		keys.Add(item.Relationship.Key())
	}
	more := keys.Len() > limit
	if more && !partial {
		return 0, false, store.ErrTooManyToDelete
	}
	if more {
		keys = keys.Prefix(limit)
	}
	if keys.Len() == 0 {
		return 0, more, nil
	}
	tag, err := w.exec(ctx, endSQL, keys.Args()...)
	if err != nil {
		return 0, false, sqlstore.Classify(ctx, "postgres: deleting "+f.String(), err)
	}
	if int(tag.RowsAffected()) != keys.Len() {
		return 0, false, fmt.Errorf("postgres: deleting %s ended %d rows, expected %d: %w", f, tag.RowsAffected(), keys.Len(), errRace)
	}
	return keys.Len(), more, nil
}

// WriteSchema stores text as the schema from a new revision on.
func (s *Store) WriteSchema(ctx context.Context, text string, validate store.Validator) (store.Revision, error) {
	return s.runTx(ctx, lockFirst, true, func(ctx context.Context, w *writeTx) error {
		if validate != nil {
			if err := validate(ctx, w.base); err != nil {
				return err
			}
		}
		if _, err := w.exec(ctx, "UPDATE latch_schema SET deleted_xid = pg_current_xact_id() WHERE deleted_xid = "+maxXID); err != nil {
			return sqlstore.Classify(ctx, "postgres: ending the schema", err)
		}
		if _, err := w.exec(ctx, "INSERT INTO latch_schema (text) VALUES ($1)", text); err != nil {
			return sqlstore.Classify(ctx, "postgres: writing the schema", err)
		}
		return nil
	})
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
