package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

var copyColumns = []string{
	"resource_type", "resource_id", "relation", "subject_type", "subject_id",
	"subject_relation", "caveat_name", "caveat_context", "expiration",
}

// BulkLoad creates every relationship rels yields with COPY, in one transaction that
// becomes one revision. It fails whole, writing nothing, when a relationship already
// exists (even expired) or is yielded twice, when rels yields an error, or when a
// caveat has no name. It is not retried: rels is consumed once.
func (s *Store) BulkLoad(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	tx, err := s.writes.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: beginning a bulk load", err)
	}
	defer rollback(tx)
	next, stop := iter.Pull2(rels)
	defer stop()
	var srcErr error // an error of rels or of a relationship, not of the database
	src := pgx.CopyFromFunc(func() ([]any, error) {
		r, err, ok := next()
		switch {
		case !ok:
			return nil, nil
		case err != nil:
			srcErr = err
		case r.Caveat != nil && r.Caveat.Name == "":
			srcErr = &store.InvalidUpdateError{Update: store.Update{Op: store.Create, Relationship: r}, Reason: "caveat has no name"}
		default:
			row, err := sqlstore.CopyRow(r)
			if err == nil {
				return row, nil
			}
			srcErr = &store.InvalidUpdateError{Update: store.Update{Op: store.Create, Relationship: r}, Reason: err.Error()}
		}
		return nil, srcErr
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"latch_relationships"}, copyColumns, src); err != nil {
		if srcErr != nil {
			return 0, fmt.Errorf("postgres: bulk load: %w", srcErr)
		}
		return 0, bulkError(ctx, err)
	}
	rev, err := lock(ctx, tx)
	if err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: locking the revision counter", err)
	}
	xid, err := record(ctx, tx, rev)
	if err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: recording the revision", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.commitOutcome(rev, xid, false, sqlstore.Classify(ctx, "postgres: committing a bulk load", err))
	}
	return rev, nil
}

// bulkError turns a unique violation into an AlreadyExistsError naming the
// relationship when PostgreSQL's detail can be read back unambiguously.
func bulkError(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return sqlstore.Classify(ctx, "postgres: bulk load", err)
	}
	// Detail: Key (resource_type, ..., deleted_xid)=(document, a, viewer, user, alice, , 1844...) already exists.
	_, values, ok := strings.Cut(pgErr.Detail, ")=(")
	values, _, ok2 := strings.Cut(values, ") already exists")
	if parts := strings.Split(values, ", "); ok && ok2 && len(parts) == 7 {
		r := rel.Relationship{
			Resource: rel.ObjectRef{Type: parts[0], ID: parts[1]}, Relation: parts[2],
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: parts[3], ID: parts[4]}, Relation: parts[5]},
		}
		return fmt.Errorf("postgres: bulk load: %w", &store.AlreadyExistsError{Relationship: r})
	}
	return fmt.Errorf("postgres: bulk load: a relationship already exists or is listed twice: %s", pgErr.Detail)
}
