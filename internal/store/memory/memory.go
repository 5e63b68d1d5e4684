// Package memory is the in-process datastore: an MVCC store of relationships kept in
// pointer-free arrays and maps of interned symbols, for `--datastore-engine memory`,
// for tests and as the reference the other backends are compared with.
//
// Every write is one revision. Records carry the revisions that created and ended them,
// so a reader at any retained revision sees exactly the state then. Garbage collection
// frees records that no retained revision can see; a revision is retained until the
// write that superseded it is older than the GC window.
package memory

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
}

const (
	defaultGCWindow   = 24 * time.Hour
	defaultGCInterval = 3 * time.Minute
	// firstRevision is the empty state a new store starts at; revision 0 is never valid,
	// so a zero Revision can always be told from a real one.
	firstRevision = 1
)

// errClosed is returned by writes to a closed store.
var errClosed = errors.New("memory store is closed")

// Store is the in-memory datastore. It implements store.Store.
type Store struct {
	opts Options

	// writeMu serializes writers and the collector, so that the state a write checks
	// is the state it applies to without holding mu while validators read.
	writeMu sync.Mutex

	// mu guards every field below: readers share it, writers and the collector take it
	// exclusively while they change the indexes.
	mu       sync.RWMutex
	in       *interner
	recs     recordPages
	freeRecs []uint32
	olders   map[uint32]uint32 // record -> the previous version of its key, for records that have one
	fwd      chainIndex[fwdKey]
	rev      chainIndex[revKey]
	runs     runCache // rev's chains sorted, for ordered reads
	exact    exactIndex
	types    map[sym]*typeInfo
	side     sideTable
	ended    []uint32 // records in the order they were ended, so in order of deleted
	expiring expiryHeap
	live     int // records not ended
	closed   bool

	head    uint64
	oldest  uint64  // oldest revision garbage collection has kept every record of
	revBase uint64  // records keep their revisions as offsets from this; below oldest
	commits []int64 // commit time (unix ns) of revisions oldest..head
	schemas []schemaVersion
	// counters holds each registered counter's filter in its stored form
	// (store.EncodeCounterFilter), so a registration is copied in and out whole.
	counters map[string][]byte
	// feed holds the changes of recent revisions for watchers; appended under mu.
	feed *changefeed.Feed

	// visited counts the records queries have read, matching or not (Stats.Visited).
	visited atomic.Int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type schemaVersion struct {
	rev  uint64
	text string
}

// New returns an empty store at revision 1 and starts its background collector.
func New(opts Options) *Store {
	if opts.GCWindow <= 0 {
		opts.GCWindow = defaultGCWindow
	}
	if opts.GCInterval == 0 {
		opts.GCInterval = defaultGCInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{
		opts:     opts,
		in:       newInterner(),
		fwd:      newChainIndex((*recordPages).fwdKey, fwdKey.hash),
		rev:      newChainIndex((*recordPages).revKey, revKey.hash),
		exact:    newExactIndex(),
		types:    map[sym]*typeInfo{},
		olders:   map[uint32]uint32{},
		counters: map[string][]byte{},
		head:     firstRevision,
		oldest:   firstRevision,
		commits:  []int64{opts.Now().UnixNano()},
		feed:     changefeed.New(firstRevision, 0, 0),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if opts.GCInterval > 0 {
		go s.collectLoop()
	} else {
		close(s.done)
	}
	return s
}

// collectLoop runs garbage collection every GCInterval until Close.
func (s *Store) collectLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.GC(s.opts.Now())
		}
	}
}

// Close stops the background collector and refuses further writes. Reads keep working
// so that requests in flight can finish.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.stop)
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	})
	<-s.done
	return nil
}

// HeadRevision returns the newest committed revision.
func (s *Store) HeadRevision(ctx context.Context) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return store.Revision(s.head), nil
}

// Reader returns a reader at rev, or ErrRevisionGone / ErrRevisionInFuture.
func (s *Store) Reader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.checkRevisionLocked(uint64(rev), s.opts.Now().UnixNano()); err != nil {
		return nil, err
	}
	return &reader{s: s, rev: uint64(rev)}, nil
}

// checkRevisionLocked decides whether rev is readable at time now: it must not be past
// the head, and the write that superseded it must be younger than the GC window.
func (s *Store) checkRevisionLocked(rev uint64, now int64) error {
	switch {
	case rev > s.head:
		return store.ErrRevisionInFuture
	case rev < s.oldest:
		return store.ErrRevisionGone
	case rev < s.head && s.commits[rev+1-s.oldest] <= now-int64(s.opts.GCWindow):
		return store.ErrRevisionGone
	}
	return nil
}

// commitLocked records a new head revision committed now and returns it; it fails
// (changing nothing) only when the store retains too many revisions to address.
func (s *Store) commitLocked() (uint64, error) {
	if s.head+1-s.revBase >= revisionSpan {
		if err := s.rebaseLocked(); err != nil {
			return 0, err
		}
	}
	now := s.opts.Now().UnixNano()
	if last := s.commits[len(s.commits)-1]; now < last {
		now = last // keep commit times ordered if the clock steps back
	}
	s.head++
	s.commits = append(s.commits, now)
	return s.head, nil
}

// schemaAtLocked returns the schema text in force at rev.
func (s *Store) schemaAtLocked(rev uint64) string {
	text := ""
	for _, v := range s.schemas {
		if v.rev > rev {
			break
		}
		text = v.text
	}
	return text
}

// Stats describe the store's size, for tests and metrics.
type Stats struct {
	Live    int // relationships not deleted (expired ones included until collected)
	Records int // record slots in use, versions kept for old revisions included
	Symbols int // interned strings
	Oldest  store.Revision
	Head    store.Revision
	// Visited is how many records queries have read since the store opened, matching the
	// filter or not: what a read costs, which tests hold to what its filter selects.
	Visited int64
}

// Stats returns the store's current size.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Stats{
		Live: s.live, Records: s.recs.len() - 1 - len(s.freeRecs), Symbols: s.in.count(),
		Oldest: store.Revision(s.oldest), Head: store.Revision(s.head), Visited: s.visited.Load(),
	}
}

// TableBytes is the memory the store's pointer-free tables take: records, indexes,
// interned strings and id lists. They are the bulk of the store, and live as long as
// the relationships they hold, so a server's garbage collector pacing leaves them out
// (see gcpace) as it does the dispatch cache: otherwise a store of 100 MiB would let
// another 100 MiB of garbage gather between collections.
func (s *Store) TableBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.recs.pages) * pageSize * int(unsafe.Sizeof(record{}))
	n += sliceBytes(s.exact.slots) + sliceBytes(s.exact.tags)
	n += sliceBytes(s.fwd.slots) + sliceBytes(s.fwd.tags) + sliceBytes(s.rev.slots) + sliceBytes(s.rev.tags)
	n += sliceBytes(s.in.table) + sliceBytes(s.in.tags) + sliceBytes(s.in.locs) + sliceBytes(s.in.refs)
	n += sliceBytes(s.freeRecs) + sliceBytes(s.ended) + int(s.runs.bytes.Load())
	for _, c := range s.in.chunks {
		n += cap(c)
	}
	for _, t := range s.types {
		for _, c := range t.ids.chunks {
			n += sliceBytes(c)
		}
	}
	return int64(n)
}

// sliceBytes is the memory behind a slice of pointer-free elements.
func sliceBytes[T any](xs []T) int {
	var zero T
	return cap(xs) * int(unsafe.Sizeof(zero))
}

// reader reads a Store at one revision.
type reader struct {
	s   *Store
	rev uint64
}

func (r *reader) Revision() store.Revision { return store.Revision(r.rev) }

// Schema returns the schema text in force at the reader's revision.
func (r *reader) Schema(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	r.s.mu.RLock()
	defer r.s.mu.RUnlock()
	if r.rev < r.s.oldest {
		return "", store.ErrRevisionGone
	}
	return r.s.schemaAtLocked(r.rev), nil
}

var _ store.Store = (*Store)(nil)
