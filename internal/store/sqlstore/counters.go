package sqlstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latch-authz/latch/internal/store"
)

// Counters keeps relationship counter registrations (store.Counters) in the table
// latch_relationship_counters (name primary key, filter text), which each dialect's
// migrations create. It is a plain table, outside the relationships' versioning: a
// registration makes no revision and is read at none. The filter is the text of
// store.EncodeCounterFilter; text rather than jsonb keeps it byte for byte. The SQL
// stores embed it, so its methods are theirs.
type Counters struct {
	// Engine names the database in messages ("postgres", "cockroachdb").
	Engine string
	// Pool is the primary's pool: a registration must be seen at once by every read.
	Pool Pool
}

// RegisterCounter registers f under name.
func (c Counters) RegisterCounter(ctx context.Context, name string, f store.Filter) error {
	raw, err := store.EncodeCounterFilter(f)
	if err != nil {
		return err
	}
	tag, err := c.change(ctx, "registering a relationship counter",
		"INSERT INTO latch_relationship_counters (name, filter) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, string(raw))
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrCounterExists
	}
	return err
}

// UnregisterCounter removes the counter named name.
func (c Counters) UnregisterCounter(ctx context.Context, name string) error {
	tag, err := c.change(ctx, "unregistering a relationship counter", "DELETE FROM latch_relationship_counters WHERE name = $1", name)
	if err == nil && tag.RowsAffected() == 0 {
		return store.ErrCounterUnknown
	}
	return err
}

// CounterFilter returns the filter registered under name.
func (c Counters) CounterFilter(ctx context.Context, name string) (store.Filter, error) {
	var raw string
	err := c.Pool.QueryRow(ctx, "SELECT filter FROM latch_relationship_counters WHERE name = $1", name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Filter{}, store.ErrCounterUnknown
	}
	if err != nil {
		return store.Filter{}, Classify(ctx, c.Engine+": reading a relationship counter", err)
	}
	return store.DecodeCounterFilter([]byte(raw))
}

// change runs one statement that changes a registration. A connection lost once the
// statement may have reached the server leaves its outcome unknown, and repeating a
// registration or removal that took effect would fail: that is reported as
// store.OutcomeUnknown says. Failing to get a connection sent nothing, and is plain
// unavailability.
func (c Counters) change(ctx context.Context, what, sql string, args ...any) (pgconn.CommandTag, error) {
	what = c.Engine + ": " + what
	conn, err := c.Pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, Classify(ctx, what, err)
	}
	defer conn.Release()
	tag, err := conn.Exec(ctx, c.Pool.Tables.SQL(sql), args...)
	err = Classify(ctx, what, err)
	if errors.Is(err, store.ErrUnavailable) && !pgconn.SafeToRetry(err) {
		return tag, store.OutcomeUnknown(false, err)
	}
	return tag, err
}
