package sqlstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// QueryRower runs a statement that returns one row: a pool, a connection, or a
// transaction.
type QueryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrations is how one SQL backend versions its schema: the steps themselves differ
// by dialect (PostgreSQL runs each in a transaction, CockroachDB statement by
// statement), the bookkeeping in latch_migrations does not.
type Migrations struct {
	// Engine names the database in messages ("postgres", "cockroachdb").
	Engine string
	// Latest is the schema version this code reads and writes.
	Latest int
	// NotMigrated is what opening a database below Latest wraps.
	NotMigrated error
	// CreateTable creates latch_migrations (version, name, applied_at) if it is missing.
	CreateTable string
	// Lock, when set, serializes concurrent migrators on conn; the returned function
	// releases the lock.
	Lock func(ctx context.Context, conn *pgx.Conn) (unlock func(), err error)
	// Apply runs, in order, every step above version current and records each one.
	Apply func(ctx context.Context, conn *pgx.Conn, current int) error
}

// Migrate brings the database at uri to the latest schema version. Running it again is
// a no-op; a database newer than this code is refused.
func (m Migrations) Migrate(ctx context.Context, uri string) error {
	cfg, err := pgx.ParseConfig(uri)
	if err != nil {
		return fmt.Errorf("%s connection URI is not valid: %w", m.Engine, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Classify(ctx, m.Engine+": connecting to migrate", err)
	}
	defer conn.Close(context.Background())
	if m.Lock != nil {
		unlock, err := m.Lock(ctx, conn)
		if err != nil {
			return err
		}
		defer unlock()
	}
	if _, err := conn.Exec(ctx, m.CreateTable); err != nil {
		return Classify(ctx, m.Engine+": creating latch_migrations", err)
	}
	current, err := m.current(ctx, conn)
	if err != nil {
		return err
	}
	if current > m.Latest {
		return m.tooNew(current)
	}
	return m.Apply(ctx, conn, current)
}

// Check refuses a database that is not at exactly the latest version.
func (m Migrations) Check(ctx context.Context, q QueryRower) error {
	v, err := m.current(ctx, q)
	if err != nil {
		return err
	}
	switch {
	case v < m.Latest:
		return fmt.Errorf("%w (the database is at schema version %d; this latch needs %d)", m.NotMigrated, v, m.Latest)
	case v > m.Latest:
		return m.tooNew(v)
	}
	return nil
}

// current is the highest applied migration, 0 when none is.
func (m Migrations) current(ctx context.Context, q QueryRower) (int, error) {
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM latch_migrations").Scan(&v)
	if SQLState(err) == "42P01" { // undefined_table: never migrated
		return 0, nil
	}
	if err != nil {
		return 0, Classify(ctx, m.Engine+": reading the schema version", err)
	}
	return v, nil
}

func (m Migrations) tooNew(v int) error {
	return fmt.Errorf("%s: database schema version %d is newer than this latch supports (%d): upgrade latch", m.Engine, v, m.Latest)
}
