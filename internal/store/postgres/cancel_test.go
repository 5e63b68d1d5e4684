package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestCancelNeverLandsOnTheNextStatement: a statement whose context is canceled, and
// which then ends before the server acts on the cancel request (a proxy holds the
// request, as a loaded server delivers it late), does not leave the cancel to land on
// the next statement on its connection, whose context is fine. With pgx's own handler,
// which stops waiting for the cancel once the statement ends, the next statement failed
// with "canceling statement due to user request" here every time.
func TestCancelNeverLandsOnTheNextStatement(t *testing.T) {
	srv := pgtest.Get(t)
	for _, tc := range []struct {
		name string
		hold time.Duration // how long the proxy holds a cancel request; 0: until the test ends
	}{
		{"acknowledged late", 300 * time.Millisecond},
		{"never acknowledged", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := startCancelProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port()), tc.hold)
			uri := strings.Replace(srv.URI("postgres"), fmt.Sprintf(":%d/", srv.Port()), ":"+proxy.port()+"/", 1)
			pool, err := sqlstore.NewPool("postgres", uri, 1, 5*time.Second, "")
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			ctx := context.Background()
			blocker, err := pgx.Connect(ctx, srv.URI("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			defer blocker.Close(ctx)
			var first int32
			if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&first); err != nil {
				t.Fatal(err)
			}

			// The statement waits for a lock the blocker holds, so it is running on the
			// server when its context is canceled.
			if _, err := blocker.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
				t.Fatal(err)
			}
			stmtCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			ended := make(chan error, 1)
			go func() {
				_, err := pool.Exec(stmtCtx, "SELECT pg_advisory_xact_lock(4242)")
				ended <- err
			}()
			waitFor(t, blocker, "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
			cancel()
			<-proxy.cancels // the cancel request is on its way, and held
			if _, err := blocker.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
				t.Fatal(err)
			}
			// The statement ends with its lock (or, on a machine slower than the hold, is
			// canceled: its own context was).
			if err := <-ended; err != nil && sqlstore.SQLState(err) != "57014" {
				t.Fatalf("the canceled statement failed with %v", err)
			}

			var pid int32
			if err := pool.QueryRow(ctx, "SELECT pg_backend_pid() FROM pg_sleep(0.6)").Scan(&pid); err != nil {
				t.Fatalf("the statement after a canceled one failed: %v", err)
			}
			if tc.hold == 0 && pid == first {
				t.Errorf("a connection whose cancel request was never acknowledged was used again (backend %d)", pid)
			}
		})
	}
}

// waitFor polls sql, a query of one boolean, until it is true (for at most a minute,
// so that a broken test ends).
func waitFor(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		var ok bool
		if err := conn.QueryRow(context.Background(), sql).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still false after a minute: %s", sql)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cancelProxy forwards connections to a PostgreSQL server; one that opens with a
// cancel request is reported on cancels and held for hold (0: until the proxy closes)
// before it is forwarded.
type cancelProxy struct {
	lis     net.Listener
	target  string
	hold    time.Duration
	cancels chan struct{}
	closed  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn // guarded by mu
}

// cancelRequestCode opens a cancel request (PostgreSQL's protocol, "CancelRequest").
const cancelRequestCode = 80877102

func startCancelProxy(t *testing.T, target string, hold time.Duration) *cancelProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cancelProxy{lis: lis, target: target, hold: hold, cancels: make(chan struct{}, 16), closed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cancelProxy) port() string {
	_, port, _ := net.SplitHostPort(p.lis.Addr().String())
	return port
}

func (p *cancelProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *cancelProxy) close() {
	p.mu.Lock()
	close(p.closed)
	p.lis.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *cancelProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *cancelProxy) forward(c net.Conn) {
	defer p.wg.Done()
	head := make([]byte, 8)
	if _, err := io.ReadFull(c, head); err != nil {
		return
	}
	if binary.BigEndian.Uint32(head[4:]) == cancelRequestCode {
		p.cancels <- struct{}{}
		var release <-chan time.Time
		if p.hold > 0 {
			release = time.After(p.hold)
		}
		select {
		case <-release:
		case <-p.closed:
			return
		}
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(s) {
		return
	}
	if _, err := s.Write(head); err != nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(s, c)
		_ = s.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, s)
	c.Close()
}
