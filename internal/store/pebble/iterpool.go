package pebble

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

const (
	// maxIdleIters bounds the iterators kept for reuse: about as many as queries run
	// at once.
	maxIdleIters = 16
	// maxIterAge is how long an iterator may be reused. An iterator pins the memtables
	// and tables it reads, so old ones are closed rather than kept.
	maxIterAge = time.Second
)

// iterPool keeps idle query iterators for reuse: opening a Pebble iterator costs more
// than the few seeks of a typical query. An iterator reads the database as of its
// opening; versions are keyed by revision and a revision's data is in the database
// before it becomes the head, so an iterator opened when the head was h serves
// queries at every revision up to h.
type iterPool struct {
	mu     sync.Mutex
	idle   []pooledIter // guarded by mu; oldest first
	closed bool         // guarded by mu
}

type pooledIter struct {
	it     *pebble.Iterator
	head   uint64 // the head revision before the iterator was opened
	opened time.Time
}

// get returns an iterator over the relationship keys that sees revision rev, reused
// when one is idle, opened otherwise.
func (p *iterPool) get(s *Store, rev uint64) (pooledIter, error) {
	now := time.Now()
	p.mu.Lock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if pi := p.idle[i]; pi.head >= rev && now.Sub(pi.opened) < maxIterAge {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.mu.Unlock()
			pi.it.ResetStats()
			return pi, nil
		}
	}
	p.mu.Unlock()
	head := s.head.Load()
	it, err := s.db.NewIterWithContext(context.Background(), &pebble.IterOptions{LowerBound: []byte{tagForward}, UpperBound: []byte{tagReverse + 1}})
	if err != nil {
		return pooledIter{}, err
	}
	return pooledIter{it: it, head: head, opened: now}, nil
}

// put returns an iterator after use: kept when it is healthy, young and there is
// room, closed otherwise. Iterators past their age are closed on the way.
func (p *iterPool) put(pi pooledIter) {
	now := time.Now()
	var expired []*pebble.Iterator
	p.mu.Lock()
	n := 0
	for _, x := range p.idle {
		if now.Sub(x.opened) < maxIterAge {
			p.idle[n] = x
			n++
		} else {
			expired = append(expired, x.it)
		}
	}
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	keep := !p.closed && len(p.idle) < maxIdleIters && now.Sub(pi.opened) < maxIterAge && pi.it.Error() == nil
	if keep {
		p.idle = append(p.idle, pi)
	}
	p.mu.Unlock()
	if !keep {
		expired = append(expired, pi.it)
	}
	for _, it := range expired {
		_ = it.Close()
	}
}

// drop closes the idle iterators.
func (p *iterPool) drop() { p.closeIdle(false) }

// close closes the idle iterators and makes put close the rest; the store calls it
// once no query is running, before it closes the database.
func (p *iterPool) close() { p.closeIdle(true) }

func (p *iterPool) closeIdle(closed bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.closed = p.closed || closed
	p.mu.Unlock()
	for _, pi := range idle {
		_ = pi.it.Close()
	}
}
