package crdb

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// querier runs a reader's statements: on the read pool, or inside a write transaction.
type querier interface {
	page(ctx context.Context, sql string, args []any) ([]rel.Relationship, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lockedTx reads inside a write transaction.
type lockedTx struct{ sqlstore.LockedTx }

func (q lockedTx) page(ctx context.Context, sql string, args []any) ([]rel.Relationship, error) {
	return q.Page(ctx, sql, args)
}

// reader reads at one revision: with AS OF SYSTEM TIME on the pool, or at the
// transaction's own timestamp inside a write.
type reader struct {
	s    *Store
	q    querier
	rev  store.Revision
	asOf string // "" inside a transaction
}

// Reader reads at rev.
func (s *Store) Reader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.checkRevision(ctx, rev); err != nil {
		return nil, err
	}
	return &reader{s: s, q: poolQuerier{s}, rev: rev, asOf: asOf(rev)}, nil
}

func (r *reader) Revision() store.Revision { return r.rev }

// selectPage builds the statement reading at most limit relationships matching f
// after the key after, as of asOf.
func selectPage(f store.Filter, asOf string, now time.Time, after *rel.Key, limit int) (string, []any) {
	var a sqlstore.Args
	sel := sqlstore.Select{Table: "latch_relationships", AsOf: asOf, Filter: f, Now: now, Limit: limit}
	return sel.Build(&a, after), a.Values
}

func (r *reader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	now := r.s.opts.Now()
	fetch := func(ctx context.Context, after *rel.Key, n int) ([]rel.Relationship, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sql, args := selectPage(f, r.asOf, now, after, n)
		page, err := r.q.page(ctx, sql, args)
		if err != nil {
			return nil, classify(ctx, "cockroachdb: query "+f.String(), err)
		}
		return page, nil
	}
	return sqlstore.Pages(ctx, store.NewCursorCodec(f), opts, fetch)
}

func (r *reader) Schema(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var text string
	err := r.q.QueryRow(ctx, schemaSQL(r.asOf)).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", classify(ctx, "cockroachdb: reading the schema", err)
	}
	return text, nil
}

func schemaSQL(asOf string) string {
	sql := "SELECT text FROM latch_schema"
	if asOf != "" {
		sql += " " + asOf
	}
	return sql + " WHERE singleton"
}

// classify maps a read below the cluster's GC threshold to ErrRevisionGone and the
// rest as sqlstore.Classify does.
func classify(ctx context.Context, what string, err error) error {
	if err != nil && strings.Contains(err.Error(), "GC threshold") {
		return fmt.Errorf("%s: %w: %w", what, store.ErrRevisionGone, err)
	}
	return sqlstore.Classify(ctx, what, err)
}

type poolQuerier struct{ s *Store }

func (q poolQuerier) page(ctx context.Context, sql string, args []any) ([]rel.Relationship, error) {
	rows, err := q.s.reads.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return sqlstore.CollectRelationships(rows)
}

func (q poolQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return q.s.reads.QueryRow(ctx, sql, args...)
}
