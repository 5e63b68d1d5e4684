package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// programArgs, in the environment, makes the test binary the program itself, run
// with these arguments (one per line): a process the test can kill.
const programArgs = "MATERIALIZE_CONSUMER_ARGS"

// TestMain runs a throwaway PostgreSQL server for the consumer's tables and checks
// that no test leaks goroutines.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(programArgs); ok {
		os.Args = append(os.Args[:1], strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// killer cancels a consumer's context when it starts the after-th statement (from 0)
// containing match: inside the transaction that statement belongs to, after the
// statements before it in that transaction ran and before it commits.
type killer struct {
	mu     sync.Mutex
	match  string             // guarded by mu
	after  int                // guarded by mu
	cancel context.CancelFunc // guarded by mu; nil: disarmed
	fired  bool               // guarded by mu
}

func (k *killer) arm(match string, after int, cancel context.CancelFunc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.match, k.after, k.cancel, k.fired = match, after, cancel, false
}

func (k *killer) hasFired() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fired
}

func (k *killer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel == nil || !strings.Contains(data.SQL, k.match) {
		return ctx
	}
	if k.after--; k.after < 0 {
		k.cancel()
		k.cancel, k.fired = nil, true
	}
	return ctx
}

func (*killer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// syncBuffer is a log the consumer writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is one run of the consumer.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// startRun runs c until the run is stopped; with a killer, the killer ends it.
func startRun(ctx context.Context, c *consumer, kill *killer, match string, after int) *running {
	rctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan error, 1)}
	if kill != nil {
		kill.arm(match, after, cancel)
	}
	go func() { r.done <- c.run(rctx) }()
	return r
}

// stop cancels the run (if a killer has not) and waits for it to end; a run ends
// only by its context.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the consumer ended with %v, want context.Canceled", err)
	}
}

// TestConsumerMatchesLookupResources runs the consumer against latch and a real
// PostgreSQL while users, groups, folders and documents move, killing it in the middle
// of a LookupPermissionSets page's transaction, of a watched revision's transaction
// and of the stream, and checks at each step that the tables' join for every user
// equals LookupResources at the revision the tables are at; then makes a breaking
// schema change, kills the run in the transaction that swaps the rebuilt tables in,
// and checks the tables the next run serves the same way.
func TestConsumerMatchesLookupResources(t *testing.T) {
	rnd := rand.New(rand.NewPCG(33, 5))
	l, ctx := startSeeded(t, rnd)

	kill := &killer{}
	cfg, err := pgxpool.ParseConfig(pgtest.Get(t).NewDatabase(t, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = kill
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs syncBuffer
	c := &consumer{db: db, client: l.sets, pageSize: 7, log: slog.New(slog.NewTextHandler(&logs, nil))}
	defer func() {
		if t.Failed() {
			t.Logf("consumer log:\n%s", logs.String())
		}
	}()
	// start runs the consumer; with match, the after-th statement (from 0) that
	// contains it kills the run.
	start := func(match string, after int) *running {
		if match == "" {
			return startRun(ctx, c, nil, "", 0)
		}
		return startRun(ctx, c, kill, match, after)
	}

	// Killed in the third page's transaction of the first LookupPermissionSets.
	r := start("rebuild_cursor = $1", 2)
	<-r.done
	if !kill.hasFired() {
		t.Fatal("the first run ended before its third page")
	}
	st, err := loadState(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if !st.rebuild || st.rebuildCursor == nil || st.revision != nil {
		t.Fatalf("after a kill in the third page: state %+v, want a rebuild under way with a cursor and no revision", st)
	}

	// Resumed from the cursor, then killed in a watched revision's transaction
	// while the writes run.
	w := startWriter(ctx, l, 7)
	r = start("UPDATE materialize_state SET revision = $1", 6)
	<-r.done
	if !kill.hasFired() {
		t.Fatal("the second run ended before its seventh watched revision")
	}
	compareAll(ctx, t, l, db)
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}

	// Resumed from the stored revision, stopped mid-stream while more writes run
	// once it has stored five revisions, resumed again.
	r = start("", 0)
	w = startWriter(ctx, l, 8)
	waitRevisions(ctx, t, db, 5, w.done)
	r.stop(t)
	compareAll(ctx, t, l, db)
	r = start("", 0)
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, l, db, "end")
	compareAll(ctx, t, l, db)

	// A breaking schema change: the tables are rebuilt, the run killed in the
	// transaction that swaps them in, and the next run serves them.
	r.stop(t)
	r = start("_rebuild RENAME TO", 0)
	if _, err := l.schema.WriteSchema(ctx, &v1.WriteSchemaRequest{Schema: narrowerSchema}); err != nil {
		t.Fatal(err)
	}
	<-r.done
	if !kill.hasFired() {
		t.Fatal("the run after the breaking schema change ended before it swapped the tables")
	}
	if st, err := loadState(ctx, db); err != nil || !st.rebuild || st.rebuildCursor == nil {
		t.Fatalf("after a kill in the swap: state %+v (%v), want the rebuild's pages stored and the rebuild still due", st, err)
	}
	r = start("", 0)
	waitFor(ctx, t, l, db, "schema")
	compareAll(ctx, t, l, db)
	if log := logs.String(); !strings.Contains(log, "breaking schema change; rebuilding") {
		t.Errorf("the consumer did not rebuild after a breaking schema change; its log:\n%s", log)
	}
	r.stop(t)
}

// TestConsumerProcessKilled runs the program as a process, kills it (SIGKILL, wherever
// it is: in a transaction, between two, in a backfill) while the writes run, once
// it has stored some revisions, starts it again, and checks the join against
// LookupResources once it has caught up; a SIGTERM then ends it cleanly.
func TestConsumerProcessKilled(t *testing.T) {
	l, ctx := startSeeded(t, rand.New(rand.NewPCG(4, 4)))
	uri := pgtest.Get(t).NewDatabase(t, "", nil)
	db, err := pgxpool.New(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs syncBuffer
	defer func() {
		if t.Failed() {
			t.Logf("the program's output:\n%s", logs.String())
		}
	}()
	program := func() *exec.Cmd {
		args := []string{"--endpoint", l.addr, "--token", testKey, "--insecure", "--postgres", uri, "--page-size", "5"}
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), programArgs+"="+strings.Join(args, "\n"))
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	cmd := program()
	waitRevisions(ctx, t, db, 1, nil) // the backfill is in
	w := startWriter(ctx, l, 9)
	waitRevisions(ctx, t, db, 5, w.done)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the killed program exited cleanly")
	}
	cmd = program()
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, l, db, "killed")
	compareAll(ctx, t, l, db)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program ended by SIGTERM: %v, want a clean exit", err)
	}
}

// TestConsumerStartsOverFromAnUnknownRevision gives the consumer a stored revision
// latch refuses (one past its head, as after latch lost a memory store): the watch
// fails with OUT_OF_RANGE, the consumer looks the sets up afresh into new tables, and
// its join equals LookupResources again.
func TestConsumerStartsOverFromAnUnknownRevision(t *testing.T) {
	l, ctx := startSeeded(t, rand.New(rand.NewPCG(5, 5)))
	db, err := pgxpool.New(ctx, pgtest.Get(t).NewDatabase(t, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs syncBuffer
	c := &consumer{db: db, client: l.sets, pageSize: 50, log: slog.New(slog.NewTextHandler(&logs, nil))}
	r := startRun(ctx, c, nil, "", 0)
	waitFor(ctx, t, l, db, "before")
	r.stop(t)
	_, rev, err := lookup(ctx, db, "document", "view", "user", "u0")
	if err != nil {
		t.Fatal(err)
	}
	head, err := zedtoken.Decode(rev.GetToken())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "UPDATE materialize_state SET revision = $1", zedtoken.Encode(head+1000)); err != nil {
		t.Fatal(err)
	}
	r = startRun(ctx, c, nil, "", 0)
	waitFor(ctx, t, l, db, "after")
	compareAll(ctx, t, l, db)
	r.stop(t)
	if log := logs.String(); !strings.Contains(log, "starting a fresh LookupPermissionSets") {
		t.Errorf("the consumer did not start over; its log:\n%s", log)
	}
}
