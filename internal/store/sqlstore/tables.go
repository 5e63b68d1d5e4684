package sqlstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tables names latch's tables in a store's statements. The zero value leaves them
// unqualified, for the connection's search_path to find; InSchema qualifies every one
// with a schema, so that stores in different schemas of one database can share
// connection pools: a statement names its tables itself, and no connection carries
// per-store state that a statement of another store could run under.
type Tables struct {
	// prefix is the quoted schema and a dot, empty for unqualified names.
	prefix string
	schema string
}

// InSchema qualifies the tables with schema.
func InSchema(schema string) Tables {
	return Tables{prefix: pgx.Identifier{schema}.Sanitize() + ".", schema: schema}
}

// tableNames are latch's tables, in every dialect's migrations.
var tableNames = map[string]bool{
	"latch_relationships": true, "latch_transactions": true, "latch_revision": true,
	"latch_schema": true, "latch_relationship_counters": true, "latch_migrations": true,
}

// SQL is stmt with every latch table it names qualified. Statements write table
// names bare (latch_relationships, not "latch_relationships"); other identifiers that
// merely start with latch_ (constraints, indexes) are left alone.
func (t Tables) SQL(stmt string) string {
	if t.prefix == "" {
		return stmt
	}
	var b strings.Builder
	b.Grow(len(stmt) + 4*len(t.prefix))
	for {
		i := strings.Index(stmt, "latch_")
		if i < 0 {
			b.WriteString(stmt)
			return b.String()
		}
		end := i + len("latch_")
		for end < len(stmt) && isIdentByte(stmt[end]) {
			end++
		}
		b.WriteString(stmt[:i])
		if (i == 0 || !isIdentByte(stmt[i-1]) && stmt[i-1] != '.' && stmt[i-1] != '"') && tableNames[stmt[i:end]] {
			b.WriteString(t.prefix)
		}
		b.WriteString(stmt[i:end])
		stmt = stmt[end:]
	}
}

// ident names table as an identifier (for COPY).
func (t Tables) ident(table string) pgx.Identifier {
	if t.schema == "" {
		return pgx.Identifier{table}
	}
	return pgx.Identifier{t.schema, table}
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Pool is a connection pool whose statements, and its transactions' statements, name
// Tables' tables. Several Pools with different Tables may share one pgxpool.Pool.
type Pool struct {
	*pgxpool.Pool
	Tables Tables
}

// Exec runs sql with its tables qualified.
func (p Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.Pool.Exec(ctx, p.Tables.SQL(sql), args...)
}

// Query runs sql with its tables qualified.
func (p Pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.Pool.Query(ctx, p.Tables.SQL(sql), args...)
}

// QueryRow runs sql with its tables qualified.
func (p Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.Pool.QueryRow(ctx, p.Tables.SQL(sql), args...)
}

// SendBatch sends b with the tables of each of its statements qualified.
func (p Pool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	p.Tables.batch(b)
	return p.Pool.SendBatch(ctx, b)
}

// BeginTx begins a transaction whose statements name p's tables.
func (p Pool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := p.Pool.BeginTx(ctx, opts)
	if err != nil || p.Tables.prefix == "" {
		return tx, err
	}
	return schemaTx{Tx: tx, t: p.Tables}, nil
}

// Begin begins a transaction whose statements name p's tables.
func (p Pool) Begin(ctx context.Context) (pgx.Tx, error) {
	return p.BeginTx(ctx, pgx.TxOptions{})
}

func (t Tables) batch(b *pgx.Batch) {
	if t.prefix == "" {
		return
	}
	for _, q := range b.QueuedQueries {
		q.SQL = t.SQL(q.SQL)
	}
}

// schemaTx is a transaction whose statements name its Tables' tables.
type schemaTx struct {
	pgx.Tx
	t Tables
}

func (tx schemaTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return tx.Tx.Exec(ctx, tx.t.SQL(sql), args...)
}

func (tx schemaTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return tx.Tx.Query(ctx, tx.t.SQL(sql), args...)
}

func (tx schemaTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return tx.Tx.QueryRow(ctx, tx.t.SQL(sql), args...)
}

func (tx schemaTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx.t.batch(b)
	return tx.Tx.SendBatch(ctx, b)
}

func (tx schemaTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if len(table) == 1 && tableNames[table[0]] {
		table = tx.t.ident(table[0])
	}
	return tx.Tx.CopyFrom(ctx, table, columns, src)
}

// Begin starts a savepoint, whose statements name the same tables.
func (tx schemaTx) Begin(ctx context.Context) (pgx.Tx, error) {
	sub, err := tx.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return schemaTx{Tx: sub, t: tx.t}, nil
}
