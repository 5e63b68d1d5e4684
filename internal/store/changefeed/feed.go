// Package changefeed holds what the store backends share to implement store.Watcher: a
// bounded in-memory log of recently committed revisions that writers append to without
// ever waiting for readers (Feed), and the watch loop that turns a backend's
// step-by-step reads of committed changes into a store.Watcher iterator with
// checkpoints (Watch). A backend that keeps a Feed gets its whole watch from WatchFeed
// and Feed.Step, and supplies only the rebuild of revisions the feed has dropped.
package changefeed

import (
	"slices"
	"sync"

	"github.com/latch-authz/latch/internal/store"
)

// Default bounds of a Feed: enough for a watcher that pauses for a moment (a slow
// network write) to resume from memory; one further behind reads the store's history.
const (
	DefaultMaxRevisions = 4096
	DefaultMaxUpdates   = 1 << 16
)

// Feed is a bounded log of the changes of the most recent revisions, consecutive and in
// order. Appending never blocks on readers: when a bound is passed the oldest revisions
// are dropped, and a reader that needed them is told to read the store's history
// instead (Batch.Gap). Every method is safe for concurrent use.
type Feed struct {
	maxRevisions, maxUpdates int

	mu      sync.Mutex
	entries []entry        // guarded by mu; revisions last-len(entries)+1 .. last
	last    store.Revision // guarded by mu; the newest revision appended (or the start)
	updates int            // guarded by mu; updates held by entries
	wake    chan struct{}  // guarded by mu; closed and replaced by Append and Notify
}

type entry struct {
	change store.Change
	// partial: the revision's updates were too many to keep; read them from history.
	partial bool
}

// New returns an empty feed whose next revision is start+1. Non-positive bounds take
// the defaults.
func New(start store.Revision, maxRevisions, maxUpdates int) *Feed {
	if maxRevisions <= 0 {
		maxRevisions = DefaultMaxRevisions
	}
	if maxUpdates <= 0 {
		maxUpdates = DefaultMaxUpdates
	}
	return &Feed{maxRevisions: maxRevisions, maxUpdates: maxUpdates, last: start, wake: make(chan struct{})}
}

// Append records the changes of revision c.Revision and wakes waiters. Revisions must
// be appended in order; a gap (a revision that was never appended) empties the feed, so
// that readers fall back to history rather than miss it. partial says that c does not
// list the revision's updates (a bulk load): readers get them from history.
func (f *Feed) Append(c store.Change, partial bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Revision != f.last+1 {
		f.entries, f.updates = nil, 0
	}
	if len(c.Updates) > f.maxUpdates {
		partial = true
	}
	if partial {
		c.Updates = nil
	}
	f.entries = append(f.entries, entry{change: c, partial: partial})
	f.updates += len(c.Updates)
	f.last = c.Revision
	for len(f.entries) > f.maxRevisions || f.updates > f.maxUpdates {
		f.updates -= len(f.entries[0].change.Updates)
		f.entries[0] = entry{}
		f.entries = f.entries[1:]
	}
	f.notifyLocked()
}

// Notify wakes the waiters, for a backend whose appended revisions become visible later
// than they are appended.
func (f *Feed) Notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notifyLocked()
}

func (f *Feed) notifyLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// Wait returns a channel that is closed by the next Append or Notify. Take it before
// looking for new revisions, so that none slips in between unnoticed.
func (f *Feed) Wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wake
}

// Batch is what a Read found.
type Batch struct {
	// Changes are the non-empty changes of revisions after the read's position, in
	// order; they share memory with the feed and must not be modified.
	Changes []store.Change
	// Through is the newest revision the read covered (its position when none).
	Through store.Revision
	// Gap, when not zero, says that the feed cannot serve the revisions after the
	// read's position up to Gap: they must be read from the store's history. Changes is
	// then empty and Through is the read's position.
	Gap store.Revision
}

// Read returns the changes of up to max revisions after after and at or below visible
// (the newest revision readers may see).
func (f *Feed) Read(after, visible store.Revision, max int) Batch {
	f.mu.Lock()
	defer f.mu.Unlock()
	upTo := min(f.last, visible)
	if after >= upTo {
		return Batch{Through: after}
	}
	first := f.last - store.Revision(len(f.entries)) + 1
	if after+1 < first {
		return Batch{Through: after, Gap: min(first-1, upTo)}
	}
	b := Batch{Through: after}
	for rev := after + 1; rev <= upTo && int(rev-after) <= max; rev++ {
		e := f.entries[rev-first]
		if e.partial {
			if rev == after+1 {
				return Batch{Through: after, Gap: rev}
			}
			break
		}
		if len(e.change.Updates) > 0 || e.change.SchemaChanged {
			b.Changes = append(b.Changes, e.change)
		}
		b.Through = rev
	}
	return b
}

// stepRevisions bounds the revisions one Step reads from the feed.
const stepRevisions = 256

// Step is the watch step of a backend that keeps its recent revisions in f: the
// changes after after up to head (the newest revision readers may see) come from the
// feed, or, when the feed no longer holds them, from history, which rebuilds the
// non-empty changes of the revisions after+1..through from what the backend stores.
// wake is the channel from Wait, taken before head was read.
func (f *Feed) Step(after, head store.Revision, wake <-chan struct{}, history func(through store.Revision) ([]store.Change, error)) (Step, error) {
	if after > head {
		return Step{}, store.ErrRevisionInFuture
	}
	b := f.Read(after, head, stepRevisions)
	if b.Gap == 0 {
		return Step{Changes: b.Changes, Through: b.Through, More: b.Through < head, Wake: wake}, nil
	}
	changes, err := history(b.Gap)
	if err != nil {
		return Step{}, err
	}
	return Step{Changes: changes, Through: b.Gap, More: b.Gap < head, Wake: wake}, nil
}

// SortUpdates puts a revision's updates in key order, the order Change promises.
func SortUpdates(us []store.RelationshipChange) {
	slices.SortFunc(us, func(a, b store.RelationshipChange) int {
		return store.CompareKeys(a.Relationship.Key(), b.Relationship.Key())
	})
}

// Assemble turns changes gathered by revision (a backend's rebuilt history) into
// Changes in revision order, each with its updates in key order; a revision in schema
// replaced the schema, with or without relationship updates.
func Assemble[R ~uint64](byRev map[R][]store.RelationshipChange, schema map[R]bool) []store.Change {
	revs := make([]R, 0, len(byRev)+len(schema))
	for rev := range byRev {
		revs = append(revs, rev)
	}
	for rev := range schema {
		if _, ok := byRev[rev]; !ok {
			revs = append(revs, rev)
		}
	}
	slices.Sort(revs)
	out := make([]store.Change, 0, len(revs))
	for _, rev := range revs {
		us := byRev[rev]
		SortUpdates(us)
		out = append(out, store.Change{Revision: store.Revision(rev), Updates: us, SchemaChanged: schema[rev]})
	}
	return out
}
