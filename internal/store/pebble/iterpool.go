package pebble

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// maxIdleIters bounds the iterators kept for reuse: about as many as queries run at
// once.
const maxIdleIters = 16

// maxIterAge is how long an iterator may be reused. An iterator pins the memtables and
// tables it reads, so old ones are closed rather than kept. A variable so that tests
// can shorten it.
var maxIterAge = time.Second

// iterPool keeps idle query iterators for reuse: opening a Pebble iterator costs more
// than the few seeks of a typical query. An iterator reads the database as of its
// opening; versions are keyed by revision and a revision's data is in the database
// before it becomes the head, so an iterator opened when the head was h serves
// queries at every revision up to h.
type iterPool struct {
	// l6 decides whether new iterators read the bottom level's bloom filters.
	l6 struct {
		sync.Mutex
		use     bool
		checked time.Time
	}

	mu     sync.Mutex
	idle   []pooledIter // guarded by mu; in the order they were returned
	gen    uint64       // guarded by mu; raised by drop: older iterators are not kept
	sweep  *time.Timer  // guarded by mu; closes expired iterators of an idle store
	armed  bool         // guarded by mu; sweep is due to run
	closed bool         // guarded by mu
}

type pooledIter struct {
	it     *pebble.Iterator
	head   uint64 // the head revision before the iterator was opened
	gen    uint64 // the pool's generation before the iterator was opened
	opened time.Time
	taken  time.Time // when get handed it out; put judges ages by it, saving a clock read
}

// get returns an iterator over the relationship keys that sees revision rev, reused
// when one is idle, opened otherwise.
func (p *iterPool) get(s *Store, rev uint64) (pooledIter, error) {
	now := time.Now()
	p.mu.Lock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if pi := p.idle[i]; pi.head >= rev && now.Sub(pi.opened) < maxIterAge {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.mu.Unlock()
			pi.it.ResetStats()
			pi.taken = now
			return pi, nil
		}
	}
	gen := p.gen
	p.mu.Unlock()
	head := s.head.Load()
	it, err := s.db.NewIterWithContext(context.Background(), &pebble.IterOptions{
		LowerBound: []byte{tagForward}, UpperBound: []byte{tagReverse + 1},
		UseL6Filters: p.useL6Filters(s, now),
	})
	if err != nil {
		return pooledIter{}, err
	}
	return pooledIter{it: it, head: head, gen: gen, opened: now, taken: now}, nil
}

// l6FilterRecheck is how often useL6Filters looks at the LSM's shape again.
const l6FilterRecheck = 10 * time.Second

// filterShareOfTables is the share of a table that its bloom filter takes: 10 bits
// per key come to 5.6–6.4% of latch's tables (measured at 99M relationships, whose
// keys are short; longer ids make it smaller).
const filterShareOfTables = 0.065

// useL6Filters reports whether new iterators should read the bottom level's bloom
// filters, which Pebble skips unless asked. Most of a check's prefix seeks look for
// keys that are not stored, which the filters rule out without reading blocks, and
// after a bulk import nearly all the data is in L6. But L6's filters are large: once
// they take more than a quarter of the block cache they evict the blocks the reads
// need (at 99M relationships, 200 MB of them in the 64 MiB cache halved the checks
// per second), so they are read only while they fit.
func (p *iterPool) useL6Filters(s *Store, now time.Time) bool {
	p.l6.Lock()
	defer p.l6.Unlock()
	// Never checked, checked is the zero time, long past.
	if now.Sub(p.l6.checked) >= l6FilterRecheck {
		filters := float64(s.db.Metrics().Levels[6].TablesSize) * filterShareOfTables
		p.l6.use, p.l6.checked = filters <= float64(s.opts.CacheSize)/4, now
	}
	return p.l6.use
}

// put returns an iterator after use: kept when it is healthy, young and of the
// current generation, closed otherwise. When the pool is full it replaces the oldest
// idle iterator, which serves fewer revisions and pins older data. Iterators past
// their age are closed on the way; one that aged while in use is closed by the next
// get or sweep.
func (p *iterPool) put(pi pooledIter) {
	now := pi.taken
	p.mu.Lock()
	closing := p.takeExpiredLocked(now)
	keep := !p.closed && pi.gen == p.gen && now.Sub(pi.opened) < maxIterAge && pi.it.Error() == nil
	if keep && len(p.idle) >= maxIdleIters {
		i := p.oldestLocked()
		if keep = p.idle[i].opened.Before(pi.opened); keep {
			closing = append(closing, p.idle[i].it)
			p.idle = slices.Delete(p.idle, i, i+1)
		}
	}
	if keep {
		p.idle = append(p.idle, pi)
		p.armLocked()
	} else {
		closing = append(closing, pi.it)
	}
	p.mu.Unlock()
	for _, it := range closing {
		_ = it.Close()
	}
}

// takeExpiredLocked removes the idle iterators past their age and returns them.
func (p *iterPool) takeExpiredLocked(now time.Time) []*pebble.Iterator {
	var expired []*pebble.Iterator
	p.idle = slices.DeleteFunc(p.idle, func(pi pooledIter) bool {
		if now.Sub(pi.opened) < maxIterAge {
			return false
		}
		expired = append(expired, pi.it)
		return true
	})
	return expired
}

// oldestLocked returns the index of the idle iterator opened first; the pool is not
// empty.
func (p *iterPool) oldestLocked() int {
	oldest := 0
	for i, pi := range p.idle {
		if pi.opened.Before(p.idle[oldest].opened) {
			oldest = i
		}
	}
	return oldest
}

// armLocked schedules a sweep unless one is due: without it, the iterators left idle
// when queries stop would pin their memtables and tables until the next query.
func (p *iterPool) armLocked() {
	if p.armed {
		return
	}
	p.armed = true
	if p.sweep == nil {
		p.sweep = time.AfterFunc(maxIterAge, p.sweepIdle)
	} else {
		p.sweep.Reset(maxIterAge)
	}
}

// sweepIdle closes the expired idle iterators and comes back while some remain, so an
// idle iterator lives at most twice maxIterAge. It closes them holding mu: the store
// closes the pool before the database, and close must not return while an iterator
// is being closed here.
func (p *iterPool) sweepIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.closed {
		return
	}
	for _, it := range p.takeExpiredLocked(time.Now()) {
		_ = it.Close()
	}
	if len(p.idle) > 0 {
		p.armLocked()
	}
}

// drop closes the idle iterators and makes put close those in use, so that every
// later query sees what the collector removed.
func (p *iterPool) drop() { p.closeIdle(false) }

// close closes the idle iterators and makes put close the rest; the store calls it
// once no query is running, before it closes the database.
func (p *iterPool) close() { p.closeIdle(true) }

func (p *iterPool) closeIdle(closed bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.gen++
	p.closed = p.closed || closed
	if p.closed && p.sweep != nil {
		p.sweep.Stop()
	}
	p.mu.Unlock()
	for _, pi := range idle {
		_ = pi.it.Close()
	}
}
