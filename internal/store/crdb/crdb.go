// Package crdb is the CockroachDB datastore (`--datastore-engine cockroachdb`). It
// implements store.Store with the SQL layer it shares with the PostgreSQL store
// (internal/store/sqlstore: filters, paging, caveat columns, update checks, error
// classification), and differs where CockroachDB's MVCC does the work PostgreSQL's
// store does by hand:
//
//   - A revision is the HLC commit timestamp of a write, read in the write's
//     transaction with cluster_logical_timestamp() (which fixes the commit timestamp)
//     and packed into 64 bits by EncodeRevision. Reads at a revision are `AS OF SYSTEM
//     TIME` reads at DecodeRevision(rev), so the table holds only current rows and
//     CockroachDB keeps the history. Revisions older than Options.GCWindow are refused
//     with store.ErrRevisionGone; the table's gc.ttlseconds (set by Migrate to 25
//     hours) must stay above the window.
//   - Write transactions are SERIALIZABLE, CockroachDB's default, so preconditions and
//     validators read exactly the state the write commits over. Transactions that
//     fail with SQLSTATE 40001 (retry errors) are run again.
//   - Watch reads a core changefeed (ChangefeedSQL) on a connection of its own and
//     releases each commit's rows once a resolved timestamp covers them. Changefeeds
//     need rangefeeds: `SET CLUSTER SETTING kv.rangefeed.enabled = true`.
//
// # Testing against a real cluster
//
// No CockroachDB binary can be installed where latch is developed, so the conformance
// suite runs only when LATCH_CRDB_URI names a cluster the tests may create databases
// on, for example a local single node:
//
//	cockroach start-single-node --insecure --listen-addr=127.0.0.1:26257 &
//	LATCH_CRDB_URI='postgres://root@127.0.0.1:26257/defaultdb?sslmode=disable' \
//	    go test ./internal/store/crdb/
//
// Each test gets a fresh database (latch_test_<n>), migrated, and dropped afterwards.
// Without LATCH_CRDB_URI only the tests that need no server run (revision encoding,
// SQL generation).
package crdb

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	ReadConns  int32         // default 16
	WriteConns int32         // default 8
	GCWindow   time.Duration // how long old revisions stay readable; default 24h
	// ConnectTimeout bounds establishing one connection. Default 5s.
	ConnectTimeout time.Duration
	Now            func() time.Time // decides expiration and the GC window; default time.Now
}

func (o *Options) setDefaults() {
	if o.ReadConns <= 0 {
		o.ReadConns = 16
	}
	if o.WriteConns <= 0 {
		o.WriteConns = 8
	}
	if o.GCWindow <= 0 {
		o.GCWindow = 24 * time.Hour
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Store is the CockroachDB datastore.
type Store struct {
	opts   Options
	reads  *pgxpool.Pool
	writes *pgxpool.Pool
	// Counters keeps relationship counter registrations, on the write pool.
	sqlstore.Counters
	// head is the newest revision this process has seen; revisions up to it are known
	// not to be in the future.
	head atomic.Uint64
}

var _ store.Store = (*Store)(nil)

// ErrNotMigrated is returned by Open when the database lacks this version's schema.
var ErrNotMigrated = errors.New(`database is not migrated: run "latch datastore migrate --datastore-engine cockroachdb --datastore-conn-uri ..."`)

// Open connects to the cluster at uri and checks the database's schema version.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	opts.setDefaults()
	reads, err := sqlstore.NewPool("cockroachdb", uri, opts.ReadConns, opts.ConnectTimeout, "")
	if err != nil {
		return nil, err
	}
	writes, err := sqlstore.NewPool("cockroachdb", uri, opts.WriteConns, opts.ConnectTimeout, "")
	if err != nil {
		reads.Close()
		return nil, err
	}
	s := &Store{opts: opts, reads: reads, writes: writes, Counters: sqlstore.Counters{Engine: "cockroachdb", Pool: sqlstore.Pool{Pool: writes}}}
	if err := schemaVersions.Check(ctx, writes); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the connection pools.
func (s *Store) Close() error {
	s.reads.Close()
	s.writes.Close()
	return nil
}

// HeadRevision is the cluster's current timestamp: every write that has returned
// committed below it.
func (s *Store) HeadRevision(ctx context.Context) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	rev, err := clusterRevision(ctx, s.reads)
	if err != nil {
		return 0, err
	}
	s.sawHead(rev)
	return rev, nil
}

// clusterRevision reads cluster_logical_timestamp(). Inside a transaction it is the
// transaction's commit timestamp.
func clusterRevision(ctx context.Context, q sqlstore.QueryRower) (store.Revision, error) {
	var text string
	if err := q.QueryRow(ctx, "SELECT cluster_logical_timestamp()::STRING").Scan(&text); err != nil {
		return 0, sqlstore.Classify(ctx, "cockroachdb: reading the cluster timestamp", err)
	}
	h, err := ParseHLC(text)
	if err != nil {
		return 0, err
	}
	return EncodeRevision(h)
}

func (s *Store) sawHead(rev store.Revision) {
	for {
		cur := s.head.Load()
		if uint64(rev) <= cur || s.head.CompareAndSwap(cur, uint64(rev)) {
			return
		}
	}
}

// checkRevision refuses revisions outside the readable range.
func (s *Store) checkRevision(ctx context.Context, rev store.Revision) error {
	if rev == 0 || DecodeRevision(rev).WallNanos < s.opts.Now().Add(-s.opts.GCWindow).UnixNano() {
		return fmt.Errorf("cockroachdb: revision %d: %w", rev, store.ErrRevisionGone)
	}
	if uint64(rev) <= s.head.Load() {
		return nil
	}
	head, err := s.HeadRevision(ctx)
	if err != nil {
		return err
	}
	if rev > head {
		return fmt.Errorf("cockroachdb: revision %d (head is %d): %w", rev, head, store.ErrRevisionInFuture)
	}
	return nil
}
