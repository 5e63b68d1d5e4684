package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latch-authz/latch/internal/rel"
)

const (
	// cancelGrace is how long a canceled statement may go on before it is canceled.
	cancelGrace = 100 * time.Millisecond
	// cancelDeadline is how long after its context is canceled a statement's connection
	// is given up on, when the server answers neither the statement nor the cancel.
	cancelDeadline = 5 * time.Second
)

// NewPool opens a pool of at most size connections to uri. connectTimeout bounds
// establishing one connection, so that an unreachable server is reported promptly,
// unless the URI sets connect_timeout itself; appName, when not empty, is the
// application_name the server shows for the pool's sessions, unless the URI sets one.
//
// A statement whose context is canceled is left to finish for cancelGrace before the
// server is asked to cancel it, and the connection is kept (see cancelHandler).
// Canceled contexts are routine (a hedged dispatch that lost, a client that gave up),
// the statements they interrupt are short, and pgx's default answer, closing the
// connection, costs the server two new backends: one to deliver the cancel and one to
// replace the connection.
func NewPool(engine, uri string, size int32, connectTimeout time.Duration, appName string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(uri)
	if err != nil {
		return nil, fmt.Errorf("%s connection URI is not valid: %w", engine, err)
	}
	cfg.MaxConns = size
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler { return &cancelHandler{conn: c} }
	cfg.AfterRelease = func(c *pgx.Conn) bool { return c.PgConn().CustomData()[unacknowledgedCancel] == nil }
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok && appName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("%s connection pool: %w", engine, err)
	}
	return pool, nil
}

// unacknowledged marks, in a connection's CustomData, a connection whose cancel
// request the server did not acknowledge in time: it may still cancel a statement, so
// the pool closes the connection instead of handing it out again.
const unacknowledgedCancel = "latch.unacknowledged-cancel"

// cancelHandler is pgx's CancelRequestContextWatcherHandler but for one thing: once
// it has sent a cancel request it waits for the server to acknowledge it (to close the
// cancel connection, which PostgreSQL does after signalling the backend) before the
// connection is used again. pgx stops waiting as soon as the statement ends and sleeps
// 100 ms instead; on a loaded server the signal can land later, during the next
// statement on the connection, which then fails with "canceling statement due to user
// request" although its own context was fine (one check in 222,528 did, through a
// 3-node cluster whose hedges cancel dispatches all the time).
type cancelHandler struct {
	conn *pgconn.PgConn
	// Set by HandleCancel, for the HandleUnwatchAfterCancel that follows it.
	unwatched      chan struct{} // closed when the statement has ended
	done           chan struct{} // closed when no cancel request is in flight
	unacknowledged atomic.Bool
}

func (h *cancelHandler) HandleCancel(context.Context) {
	deadline := time.Now().Add(cancelDeadline)
	_ = h.conn.Conn().SetDeadline(deadline)
	h.unwatched, h.done = make(chan struct{}), make(chan struct{})
	unwatched, done := h.unwatched, h.done
	go func() {
		defer close(done)
		t := time.NewTimer(cancelGrace)
		select {
		case <-unwatched:
			t.Stop()
			return // the statement ended within the grace: no cancel sent
		case <-t.C:
		}
		// Not canceled when the statement ends: the acknowledgement is what this waits for.
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		// CancelRequest reports neither an acknowledgement nor its absence; a reached
		// deadline says it did not come.
		if err := h.conn.CancelRequest(ctx); err != nil || ctx.Err() != nil {
			h.unacknowledged.Store(true)
		}
	}()
}

func (h *cancelHandler) HandleUnwatchAfterCancel() {
	close(h.unwatched)
	<-h.done
	if h.unacknowledged.Swap(false) {
		h.conn.CustomData()[unacknowledgedCancel] = true
	}
	_ = h.conn.Conn().SetDeadline(time.Time{})
}

// LockedTx serializes the statements of a write transaction: a pgx.Tx is not safe for
// concurrent use, but the store.Reader a validator reads through must be.
type LockedTx struct {
	Mu *sync.Mutex
	Tx pgx.Tx
}

// Page runs a query of SelectColumns and reads all its rows.
func (q LockedTx) Page(ctx context.Context, sql string, args []any) ([]rel.Relationship, error) {
	q.Mu.Lock()
	defer q.Mu.Unlock()
	rows, err := q.Tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return CollectRelationships(rows)
}

// QueryRow returns a row whose statement runs, holding the mutex, when it is scanned.
func (q LockedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return lockedRow{q: q, ctx: ctx, sql: sql, args: args}
}

type lockedRow struct {
	q    LockedTx
	ctx  context.Context
	sql  string
	args []any
}

func (r lockedRow) Scan(dest ...any) error {
	r.q.Mu.Lock()
	defer r.q.Mu.Unlock()
	return r.q.Tx.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
}

// CollectRelationships reads every row of SelectColumns from rows and closes them.
func CollectRelationships(rows pgx.Rows) ([]rel.Relationship, error) {
	defer rows.Close()
	var out []rel.Relationship
	for rows.Next() {
		r, err := ScanRelationship(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
