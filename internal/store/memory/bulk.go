package memory

import (
	"context"
	"iter"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// bulkBatch is how many relationships a bulk load inserts under one hold of the lock,
// which bounds how long readers wait for it.
const bulkBatch = 4096

// BulkLoad creates every relationship rels yields as one new revision (the
// ImportBulkRelationships path). It fails whole, leaving no trace, when a relationship
// already exists (expired or not) or comes twice (both AlreadyExistsError), when one is
// invalid, when rels yields an error, or when ctx ends.
//
// Unlike Write it never holds the whole input: relationships go into the indexes a
// batch at a time as they arrive, created at the revision the load will commit, which
// no reader can ask for until the load commits it. Writers wait for the whole load;
// readers only for a batch.
func (s *Store) BulkLoad(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.headReader(); err != nil {
		return 0, err
	}
	l := &bulkLoad{s: s}
	err := l.run(ctx, rels)
	s.mu.Lock()
	defer s.mu.Unlock()
	var rev uint64
	if err == nil {
		rev, err = s.commitLocked()
	}
	if err != nil {
		l.rollbackLocked()
		return 0, err
	}
	s.feed.Append(store.Change{Revision: store.Revision(rev)}, true) // watchers read the load from history
	return store.Revision(rev), nil
}

// bulkLoad is one BulkLoad in progress.
type bulkLoad struct {
	s      *Store
	batch  []rel.Relationship
	loaded []uint32 // the records inserted so far, for a rollback
}

func (l *bulkLoad) run(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) error {
	for r, err := range rels {
		if err != nil {
			return err
		}
		if err := store.CheckUpdate(store.Update{Op: store.Create, Relationship: r}); err != nil {
			return err
		}
		if l.batch = append(l.batch, r); len(l.batch) == bulkBatch {
			if err := l.flush(ctx); err != nil {
				return err
			}
		}
	}
	return l.flush(ctx)
}

// flush inserts the batch at the revision after the head. A relationship whose key
// has a live version already fails the load, whether that version is older or this
// load's (a relationship given twice exists the second time, as in SpiceDB's imports).
func (l *bulkLoad) flush(ctx context.Context) error {
	if len(l.batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRoomLocked(len(l.batch), slices.Values(l.batch)); err != nil {
		return err
	}
	rev := s.head + 1
	for _, r := range l.batch {
		idx := s.insertLocked(r, rev)
		l.loaded = append(l.loaded, idx)
		if older := s.olders[idx]; older != 0 && s.recs.at(older).deleted == liveOff {
			return &store.AlreadyExistsError{Relationship: r}
		}
	}
	clear(l.batch) // drop the references to the caller's strings
	l.batch = l.batch[:0]
	return nil
}

// rollbackLocked frees every record the load inserted, as garbage collection frees
// records no revision can read: all are marked first, so that unlinking a chunk's
// chains drops any of them those chains hold, then freed a chunk at a time, which
// bounds the memory the unlinking takes.
func (l *bulkLoad) rollbackLocked() {
	s := l.s
	for _, idx := range l.loaded {
		s.recs.at(idx).created = 0
	}
	for chunk := range slices.Chunk(l.loaded, gcChunk) {
		s.unlinkLocked(chunk)
		s.freeLocked(chunk)
	}
	s.live -= len(l.loaded)
}
