// Package postgres is the PostgreSQL datastore (`--datastore-engine postgres`), built on
// pgx. It implements store.Store.
//
// # Revisions
//
// PostgreSQL's own MVCC decides visibility by transaction ids (xid8) and snapshots; the
// store keeps every version of a relationship as a row stamped with the xid that
// created it (created_xid) and the xid that ended it (deleted_xid, the largest xid8
// while the row is current). A read at a revision filters rows with an explicit
// snapshot, so any retained revision can be read from any connection:
//
//	visible(x, n) = x = xid(n) OR pg_visible_in_snapshot(x, snapshot(n))
//	row visible at n  ⇔  visible(created_xid, n) AND NOT visible(deleted_xid, n)
//
// store.Revision is a uint64, so revisions are small integers mapped to snapshots in
// the latch_transactions table (rev, xid, snapshot, committed_at). Every write
// transaction does its work concurrently with other writers (READ COMMITTED, row locks
// and a unique index on live keys resolve conflicts) and, as its last statements,
// increments the single-row counter latch_revision (taking that row's lock until it
// commits) and records its xid with pg_current_snapshot(). Because the counter lock is
// held until commit, revision numbers follow commit order exactly: when transaction n
// records its snapshot, transactions 1..n-1 have committed (PostgreSQL releases locks
// after a commit becomes visible) and none after n has. Snapshot n therefore sees
// exactly the writes of revisions below n, and the xid term adds write n itself.
// Only that short tail is serialized; writes pay one extra round trip for it.
//
// A write's preconditions and validator read at the revision the write started from
// (its base). If other writes committed between the base and the write's own revision,
// they are checked again, under the counter lock, at the revision just below it, so a
// committed write's preconditions always held immediately before it. Filtered deletes
// and schema writes take the counter lock first and so run against an exact base.
// Serialization failures, deadlocks and unique-key races are retried.
//
// # Garbage collection
//
// A background collector (stopped by Close) picks the newest revision older than the
// GC window as the horizon, deletes the latch_transactions rows below it (so readers
// of those revisions get store.ErrRevisionGone), then deletes, in bounded batches, the
// rows ended at or before the horizon, found through a partial index on deleted_xid.
// Readers check after each page that their revision is still retained, so a read
// racing the collector fails instead of returning a partial answer.
//
// Transaction ids belong to one cluster: the data survives physical replication,
// backups and pg_upgrade (which keep the xid counter and epoch), but not a logical
// dump restored into another cluster, whose xids start over.
//
// Errors that mean the server is down or restarting are wrapped with
// store.ErrUnavailable; the connection pools reconnect on their own.
//
// Reads at a revision may go to streaming read replicas (Options.ReplicaURIs): a
// replica replays commits in order, so once its latch_revision shows revision n it
// answers reads at n exactly as the primary would. Writes, head reads, revision
// lookups and PrimaryReader's reads stay on the primary.
package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// ReadConns is the size of the pool serving reads. Default 16.
	ReadConns int32
	// WriteConns is the size of the pool serving writes. Default 8.
	WriteConns int32
	// GCWindow is how long a superseded revision stays readable. Default 24h.
	GCWindow time.Duration
	// GCInterval is how often the background collector runs. Default 3m; negative
	// turns it off (call GC yourself).
	GCInterval time.Duration
	// GCBatch is how many rows one GC statement deletes. Default 1000.
	GCBatch int
	// ConnectTimeout bounds establishing one connection, so that an unreachable server
	// is reported promptly. Default 5s (a connect_timeout in the URI wins).
	ConnectTimeout time.Duration
	// Now is the clock deciding which relationships have expired. Default time.Now.
	Now func() time.Time
	// ReplicaURIs name streaming read replicas of the database. A read at a revision
	// goes to a replica that has replayed it, and to the primary when none has; a
	// replica that fails a read is skipped for that read. Each replica gets a pool of
	// ReadConns connections.
	ReplicaURIs []string
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
	if o.GCInterval == 0 {
		o.GCInterval = 3 * time.Minute
	}
	if o.GCBatch <= 0 {
		o.GCBatch = 1000
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Store is the PostgreSQL datastore. Every method is safe for concurrent use.
type Store struct {
	opts   Options
	reads  sqlstore.Pool
	writes sqlstore.Pool
	snaps  *snapshotCache
	// Counters keeps relationship counter registrations, on the write pool.
	sqlstore.Counters
	// replicas serve reads at revisions they have replayed; nextReplica spreads reads.
	replicas    []*replica
	nextReplica atomic.Uint32
	// primaryPages counts the pages readers read from the primary (ReadStats).
	primaryPages atomic.Uint64
	// oldest is the oldest revision this process knows to be retained; it only grows.
	oldest atomic.Uint64
	// commitProbe bounds the wait for the outcome of a commit that lost its connection
	// (commitProbeTime; tests shorten it).
	commitProbe time.Duration

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	// ownsPools is false for a store sharing another's pools (InSchema).
	ownsPools bool
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Replicated = (*Store)(nil)
)

// Open connects to the database at uri (a postgres:// URL or key=value string) and
// checks that it has been migrated to this version's schema.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	opts.setDefaults()
	reads, err := sqlstore.NewPool("postgres", uri, opts.ReadConns, opts.ConnectTimeout, "latch-read")
	if err != nil {
		return nil, err
	}
	writes, err := sqlstore.NewPool("postgres", uri, opts.WriteConns, opts.ConnectTimeout, "latch-write")
	if err != nil {
		reads.Close()
		return nil, err
	}
	s := newStore(opts, sqlstore.Pool{Pool: reads}, sqlstore.Pool{Pool: writes})
	s.ownsPools = true
	for _, u := range opts.ReplicaURIs {
		pool, err := sqlstore.NewPool("postgres", u, opts.ReadConns, opts.ConnectTimeout, "latch-replica")
		if err != nil {
			s.closePools()
			return nil, fmt.Errorf("read replica: %w", err)
		}
		s.replicas = append(s.replicas, &replica{pool: pool})
	}
	if err := s.start(ctx); err != nil {
		s.closePools()
		return nil, err
	}
	return s, nil
}

func newStore(opts Options, reads, writes sqlstore.Pool) *Store {
	return &Store{
		opts: opts, reads: reads, writes: writes, snaps: newSnapshotCache(4096), commitProbe: commitProbeTime,
		Counters: sqlstore.Counters{Engine: "postgres", Pool: writes},
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
}

// start checks the store's tables are at this version's schema and starts the
// collector.
func (s *Store) start(ctx context.Context) error {
	if err := schemaVersions.Check(ctx, s.writes); err != nil {
		return err
	}
	s.oldest.Store(1)
	if s.opts.GCInterval > 0 {
		go s.collect()
	} else {
		close(s.done)
	}
	return nil
}

// InSchema opens the store whose tables are in the PostgreSQL schema named schema of
// s's database (migrated there, as Migrate does with the schema as search_path),
// sharing s's connection pools: every statement it sends names its tables with the
// schema, so stores in any number of schemas use s's connections and never see each
// other's rows. opts configure its collector and clock; its connection and replica
// options are s's (it reads from the primary only). Closing it stops its collector and
// leaves the pools to s.
func (s *Store) InSchema(ctx context.Context, schema string, opts Options) (*Store, error) {
	opts.setDefaults()
	opts.ReadConns, opts.WriteConns, opts.ReplicaURIs = s.opts.ReadConns, s.opts.WriteConns, nil
	t := sqlstore.InSchema(schema)
	in := newStore(opts, sqlstore.Pool{Pool: s.reads.Pool, Tables: t}, sqlstore.Pool{Pool: s.writes.Pool, Tables: t})
	if err := in.start(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// Close stops the collector and closes the connection pools, unless the store shares
// another's (InSchema).
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.opts.GCInterval > 0 {
			close(s.stop)
		}
		<-s.done
		if s.ownsPools {
			s.closePools()
		}
	})
	return nil
}

func (s *Store) closePools() {
	s.reads.Close()
	s.writes.Close()
	for _, r := range s.replicas {
		r.pool.Close()
	}
}

// HeadRevision returns the newest committed revision.
func (s *Store) HeadRevision(ctx context.Context) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var rev int64
	if err := s.reads.QueryRow(ctx, "SELECT rev FROM latch_revision").Scan(&rev); err != nil {
		return 0, sqlstore.Classify(ctx, "postgres: reading the head revision", err)
	}
	return store.Revision(rev), nil
}
