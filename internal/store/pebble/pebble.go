// Package pebble is the embedded durable datastore: relationships, schema text,
// revisions and relationship counter registrations in a directory on local disk, kept
// by CockroachDB's Pebble storage engine.
// It is latch's default store.
//
// Every write is one revision, committed in one Pebble batch together with the new
// head revision and its commit time, and acknowledged only once the write-ahead log is
// synced, so an acknowledged write survives a crash and a torn one is never seen.
// Relationships are versioned under keys suffixed with the revision that created them;
// a reader at revision R sees the versions created at or before R and not ended by R.
// A background collector removes versions that no revision inside the GC window can
// see. The directory is locked while open, and is recognised by a LATCH marker file
// and a format version stored in the database.
package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// GCWindow is how long a superseded revision stays readable. Default 24h, as SpiceDB.
	GCWindow time.Duration
	// GCInterval is how often the background collector runs. Default 3m; negative turns
	// the background collector off (call GC yourself).
	GCInterval time.Duration
	// Now is the clock, for tests. Default time.Now. It decides commit times, revision
	// retention and which relationships have expired.
	Now func() time.Time
	// CacheSize is Pebble's block cache in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is the size of Pebble's memtables in bytes. Default 64 MiB.
	MemTableSize uint64
}

const (
	defaultGCWindow   = 24 * time.Hour
	defaultGCInterval = 3 * time.Minute
	defaultCacheSize  = 64 << 20
	defaultMemTable   = 64 << 20
	// firstRevision is the empty state a new store starts at; revision 0 is never
	// valid, so a zero Revision can always be told from a real one.
	firstRevision = 1

	// formatVersion is the layout of keys and values this code reads and writes,
	// stored in the database and in the LATCH marker file.
	formatVersion = "1"
	markerFile    = "LATCH"
	markerText    = "latch data directory\nformat " + formatVersion + "\n"
)

var (
	// ErrInUse: another process (or another Store in this one) has the directory open.
	ErrInUse = errors.New("in use by another process")
	// ErrNotLatch: the directory holds files that latch did not write.
	ErrNotLatch = errors.New("not a latch data directory")
	// ErrUnknownFormat: the directory was written by a newer latch, in a format this
	// one cannot read.
	ErrUnknownFormat = errors.New("written in an unknown format")

	errClosed = errors.New("pebble store is closed")
)

// Store is the embedded durable datastore. It implements store.Store.
type Store struct {
	dir   string
	opts  Options
	popts *pebble.Options // with Pebble's defaults filled in, for writing tables to ingest
	db    *pebble.DB
	lock  *pebble.Lock

	// writeMu serializes writers, bulk loads and the collector, so that the state a
	// write checks is the state it applies to.
	writeMu sync.Mutex
	// applied is the newest revision applied to the database, maybe not yet synced;
	// writes build on it. Guarded by writeMu.
	applied uint64
	// lastCommit is the commit time (unix ns) of applied. Guarded by writeMu.
	lastCommit int64

	// counterMu serializes counter registrations, each of which checks its key and
	// then writes it.
	counterMu sync.Mutex

	// head is the newest durable revision: readers read at or below it.
	head atomic.Uint64
	// oldest is the oldest revision the collector has kept every version of. It moves
	// before anything it frees is deleted, so a query that checks it after opening its
	// Pebble iterator never reads a half-collected revision.
	oldest atomic.Uint64

	// feed holds the changes of recent revisions for watchers; appended under writeMu
	// in revision order, read up to head.
	feed *changefeed.Feed

	// iters keeps query iterators for reuse.
	iters iterPool

	// lifeMu guards users and closed: Close waits for every operation using the
	// database to end before closing it.
	lifeMu  sync.Mutex
	idle    *sync.Cond
	users   int
	closed  bool
	closing sync.Once
	stop    chan struct{}
	done    chan struct{}
}

// Open opens (creating if needed) the data directory dir and starts the background
// collector. It fails with ErrInUse when the directory is open elsewhere, ErrNotLatch
// when it holds files latch did not write, and ErrUnknownFormat when a newer latch
// wrote it; in each case nothing in the directory is changed.
func Open(dir string, opts Options) (*Store, error) {
	opts = withDefaults(opts)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := prepareDir(abs); err != nil {
		return nil, err
	}
	lock, err := pebble.LockDirectory(abs, vfs.Default)
	if err != nil {
		return nil, lockError(abs, err)
	}
	popts := pebbleOptions(opts, lock)
	db, err := pebble.Open(abs, popts)
	if err != nil {
		_ = lock.Close()
		if strings.Contains(err.Error(), "comparer name") {
			return nil, fmt.Errorf("data directory %s is %w: its database was not written by latch", abs, ErrNotLatch)
		}
		return nil, fmt.Errorf("opening data directory %s: %w", abs, err)
	}
	s := &Store{dir: abs, opts: opts, popts: popts, db: db, lock: lock, stop: make(chan struct{}), done: make(chan struct{})}
	s.idle = sync.NewCond(&s.lifeMu)
	if err := s.load(); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, err
	}
	s.feed = changefeed.New(store.Revision(s.head.Load()), 0, 0)
	if opts.GCInterval > 0 {
		go s.collectLoop()
	} else {
		close(s.done)
	}
	return s, nil
}

// lockError explains a failure to lock dir: a lock held elsewhere, or a lock file
// that could not be created (a *os.PathError, such as permission denied).
func lockError(dir string, err error) error {
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	return fmt.Errorf("data directory %s is %w", dir, ErrInUse)
}

func withDefaults(opts Options) Options {
	if opts.GCWindow <= 0 {
		opts.GCWindow = defaultGCWindow
	}
	if opts.GCInterval == 0 {
		opts.GCInterval = defaultGCInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = defaultCacheSize
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = defaultMemTable
	}
	return opts
}

// prepareDir creates dir if needed and makes sure it is latch's: either empty (then it
// writes the marker file) or holding the marker file of a format this code knows.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("creating data directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading data directory %s: %w", dir, err)
	}
	marker, err := os.ReadFile(filepath.Join(dir, markerFile))
	switch {
	case err == nil:
		if string(marker) != markerText {
			return fmt.Errorf("data directory %s is %w: its %s file says %q; this latch reads format %s",
				dir, ErrUnknownFormat, markerFile, strings.TrimSpace(string(marker)), formatVersion)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("reading %s in data directory %s: %w", markerFile, dir, err)
	case slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() != "lost+found" }):
		return fmt.Errorf("data directory %s is %w: it is not empty and has no %s file; latch left it untouched, choose an empty or new directory",
			dir, ErrNotLatch, markerFile)
	}
	return writeMarker(dir)
}

// writeMarker writes the marker file durably (file and directory entry).
func writeMarker(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, markerFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("writing %s in data directory %s: %w", markerFile, dir, err)
	}
	_, err = f.WriteString(markerText)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("writing %s in data directory %s: %w", markerFile, dir, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func pebbleOptions(opts Options, lock *pebble.Lock) *pebble.Options {
	po := &pebble.Options{
		Comparer: comparer,
		// A plain file system: Pebble's default wraps it in a disk-health checker whose
		// goroutine outlives a failed Open.
		FS:                 vfs.Default,
		FormatMajorVersion: pebble.FormatNewest,
		Lock:               lock,
		CacheSize:          opts.CacheSize,
		MemTableSize:       opts.MemTableSize,
		Logger:             quietLogger{},
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.EnsureDefaults()
	return po
}

// quietLogger drops Pebble's informational messages and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	log.Printf("pebble store: "+format, args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	log.Fatalf("pebble store: "+format, args...)
}

// load reads the metadata of an existing database or initializes a new one, and
// removes the remains of a bulk load that did not finish.
func (s *Store) load() error {
	format, ok, err := s.get(keyFormat)
	if err != nil {
		return fmt.Errorf("reading data directory %s: %w", s.dir, err)
	}
	if !ok {
		return s.initialize()
	}
	if string(format) != formatVersion {
		return fmt.Errorf("data directory %s is %w: format %q; this latch reads format %s", s.dir, ErrUnknownFormat, format, formatVersion)
	}
	head, err := s.getUint(keyHead)
	if err != nil {
		return err
	}
	oldest, err := s.getUint(keyOldest)
	if err != nil {
		return err
	}
	commit, err := s.getUint(commitKey(head))
	if err != nil {
		return err
	}
	s.head.Store(head)
	s.oldest.Store(oldest)
	s.applied, s.lastCommit = head, int64(commit)
	return s.abandonBulkLoad()
}

// initialize writes the metadata of a new store at firstRevision. A database with
// keys but no format marker was not written by latch, and is refused.
func (s *Store) initialize() error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	nonEmpty := it.First()
	if err := it.Close(); err != nil {
		return err
	}
	if nonEmpty {
		return fmt.Errorf("data directory %s is %w: its database has no latch format marker", s.dir, ErrNotLatch)
	}
	now := s.opts.Now().UnixNano()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(keyFormat, []byte(formatVersion), nil)
	_ = b.Set(keyHead, u64(firstRevision), nil)
	_ = b.Set(keyOldest, u64(firstRevision), nil)
	_ = b.Set(commitKey(firstRevision), u64(uint64(now)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("initializing data directory %s: %w", s.dir, err)
	}
	s.head.Store(firstRevision)
	s.oldest.Store(firstRevision)
	s.applied, s.lastCommit = firstRevision, now
	return nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// get reads one key; ok is false when it is absent.
func (s *Store) get(k []byte) (v []byte, ok bool, err error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = append([]byte(nil), v...)
	return v, true, closer.Close()
}

// getUint reads an 8-byte big-endian number that must be present.
func (s *Store) getUint(k []byte) (uint64, error) {
	v, ok, err := s.get(k)
	if err != nil {
		return 0, fmt.Errorf("reading data directory %s: %w", s.dir, err)
	}
	if !ok || len(v) != 8 {
		return 0, fmt.Errorf("data directory %s is damaged: metadata key %q is missing or malformed", s.dir, k)
	}
	return binary.BigEndian.Uint64(v), nil
}

// acquire registers an operation that uses the database; Close waits for it.
func (s *Store) acquire() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return errClosed
	}
	s.users++
	return nil
}

func (s *Store) release() {
	s.lifeMu.Lock()
	s.users--
	if s.users == 0 && s.closed {
		s.idle.Broadcast()
	}
	s.lifeMu.Unlock()
}

// Close stops the collector, waits for operations in flight and closes the database.
// Later calls fail with an error saying the store is closed.
func (s *Store) Close() error {
	var err error
	s.closing.Do(func() {
		close(s.stop)
		<-s.done
		s.lifeMu.Lock()
		s.closed = true
		for s.users > 0 {
			s.idle.Wait()
		}
		s.lifeMu.Unlock()
		s.iters.close()
		err = s.db.Close()
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
	})
	return err
}

// HeadRevision returns the newest durable revision.
func (s *Store) HeadRevision(ctx context.Context) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return store.Revision(s.head.Load()), nil
}

// Reader returns a reader at rev, or ErrRevisionGone / ErrRevisionInFuture.
func (s *Store) Reader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.checkRevision(uint64(rev)); err != nil {
		return nil, err
	}
	return &reader{s: s, rev: uint64(rev)}, nil
}

// checkRevision decides whether rev is readable now: it must not be past the head,
// and the write that superseded it must be younger than the GC window.
func (s *Store) checkRevision(rev uint64) error {
	switch head := s.head.Load(); {
	case rev > head:
		return store.ErrRevisionInFuture
	case rev < s.oldest.Load():
		return store.ErrRevisionGone
	case rev == head:
		return nil
	}
	v, ok, err := s.get(commitKey(rev + 1))
	if err != nil {
		return fmt.Errorf("pebble store: reading the commit time of revision %d: %w", rev+1, err)
	}
	if !ok || len(v) != 8 {
		return store.ErrRevisionGone // collected since the check of oldest above
	}
	if int64(binary.BigEndian.Uint64(v)) <= s.opts.Now().UnixNano()-int64(s.opts.GCWindow) {
		return store.ErrRevisionGone
	}
	return nil
}

var _ store.Store = (*Store)(nil)
