package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// TestCanceledStatementsKeepTheirConnection: when a statement's context is canceled,
// a short statement finishes and a long one is canceled on the server, and either way
// the pool's one connection lives on (the same backend answers next). pgx's default
// closes it, which costs the server a backend to receive the cancel and another to
// replace the connection: a cluster whose hedges cancel dispatches paid that on every
// lost race.
func TestCanceledStatementsKeepTheirConnection(t *testing.T) {
	srv := pgtest.Get(t)
	pool, err := sqlstore.NewPool("postgres", srv.URI("postgres"), 1, 5*time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	backend := func() int32 {
		t.Helper()
		var pid int32
		if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := backend()
	canceledAfter := func(d time.Duration, sql string) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(d, cancel)
		_, err := pool.Exec(ctx, sql)
		return err
	}

	if err := canceledAfter(10*time.Millisecond, "SELECT pg_sleep(0.05)"); err != nil {
		t.Errorf("a statement shorter than the grace failed: %v", err)
	}
	if pid := backend(); pid != first {
		t.Fatalf("after a short canceled statement the pool talks to backend %d, not %d: the connection was closed", pid, first)
	}

	start := time.Now()
	err = canceledAfter(10*time.Millisecond, "SELECT pg_sleep(30)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("a long canceled statement returned %v, want query_canceled (57014)", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("a canceled 30 s statement took %v to return", d)
	}
	if pid := backend(); pid != first {
		t.Fatalf("after a long canceled statement the pool talks to backend %d, not %d: the connection was closed", pid, first)
	}
}
