package memory

import (
	"context"
	"iter"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
)

// Watch streams the changes committed after revision after (see store.Watcher).
//
// Recent revisions come from an in-memory feed that writers append to under the write
// lock; a watcher whose position the feed has dropped (it paused for more than a few
// thousand revisions) rebuilds the missing revisions from the records' created and
// deleted revisions, which the store keeps for the whole GC window. That rebuild scans
// every record once. Versions of relationships that expired longer ago than the GC
// window are freed early and so are missing from rebuilt history.
func (s *Store) Watch(ctx context.Context, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	return changefeed.WatchFeed(ctx, s.Reader, s.watchNext, after, opts)
}

// publishLocked appends a committed revision to the feed.
func (s *Store) publishLocked(rev uint64, changes []store.RelationshipChange, schema bool) {
	changefeed.SortUpdates(changes)
	s.feed.Append(store.Change{Revision: store.Revision(rev), Updates: changes, SchemaChanged: schema}, false)
}

// watchNext reads the changes after after from the feed, or from history when the
// feed no longer holds them.
func (s *Store) watchNext(ctx context.Context, after store.Revision) (changefeed.Step, error) {
	if err := ctx.Err(); err != nil {
		return changefeed.Step{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The feed is appended under the write lock, so the wake channel taken under the
	// read lock is closed by the next revision.
	return s.feed.Step(after, store.Revision(s.head), s.feed.Wait(), func(through store.Revision) ([]store.Change, error) {
		if uint64(after) < s.oldest {
			return nil, store.ErrRevisionGone
		}
		return s.historyLocked(uint64(after), uint64(through)), nil
	})
}

// historyLocked rebuilds the non-empty changes of revisions after+1..through from the
// records. A record created in the range is a touch; one ended in the range is a
// delete, unless the same revision wrote a new version of its key (a touch that
// replaced it).
func (s *Store) historyLocked(after, through uint64) []store.Change {
	type at struct {
		rev uint64
		key exactKey
	}
	inRange := func(rev uint64) bool { return rev > after && rev <= through }
	byRev := map[uint64][]store.RelationshipChange{}
	touched := map[at]bool{}
	var deleted []uint32
	for idx := uint32(1); int(idx) < s.recs.len(); idx++ {
		r := s.recs.at(idx)
		if r.created == 0 {
			continue // a free slot
		}
		if created := s.absLocked(r.created); inRange(created) {
			byRev[created] = append(byRev[created], store.RelationshipChange{Op: store.ChangeTouch, Relationship: s.materializeLocked(idx)})
			touched[at{created, s.recs.exactKey(r)}] = true
		}
		if r.deleted != liveOff && inRange(s.absLocked(r.deleted)) {
			deleted = append(deleted, idx)
		}
	}
	for _, idx := range deleted {
		r := s.recs.at(idx)
		if rev := s.absLocked(r.deleted); !touched[at{rev, s.recs.exactKey(r)}] {
			byRev[rev] = append(byRev[rev], store.RelationshipChange{Op: store.ChangeDelete, Relationship: s.materializeLocked(idx)})
		}
	}
	schema := map[uint64]bool{}
	for _, v := range s.schemas {
		if inRange(v.rev) {
			schema[v.rev] = true
		}
	}
	return changefeed.Assemble(byRev, schema)
}

var _ store.Watcher = (*Store)(nil)
