package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"iter"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
)

// Watch streams the changes committed after revision after (see store.Watcher).
//
// Writers append each revision's changes to an in-memory feed as they apply it, and
// watchers read the feed up to the durable head. Revisions the feed no longer holds
// (a watcher paused for thousands of revisions, a watch resumed from an old token, a
// bulk load) are rebuilt from the versioned keys, which carry the revision that
// created them and the one that ended them: one scan of the forward keyspace. The
// feed lives in memory only: after a restart every watch resumes from that history.
// Versions of relationships that expired longer ago than the GC window are collected
// early and so are missing from rebuilt history.
func (s *Store) Watch(ctx context.Context, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	return changefeed.WatchFeed(ctx, s.Reader, s.watchNext, after, opts)
}

// watchChange is the change a committed tx made.
func (t *tx) watchChange() store.Change {
	changefeed.SortUpdates(t.changes)
	return store.Change{Revision: store.Revision(t.rev), Updates: t.changes, SchemaChanged: t.schemaChanged}
}

// recordChange notes, for watchers, that the tx touched or deleted k, whose version
// has the given body.
func (t *tx) recordChange(op store.ChangeOp, k rel.Key, body []byte) error {
	r := relationshipOf(k)
	if err := decodeBody(body, &r); err != nil {
		return err
	}
	t.changes = append(t.changes, store.RelationshipChange{Op: op, Relationship: r})
	return nil
}

// watchNext reads the changes after after from the feed, or from history when the
// feed does not hold them.
func (s *Store) watchNext(ctx context.Context, after store.Revision) (changefeed.Step, error) {
	if err := ctx.Err(); err != nil {
		return changefeed.Step{}, err
	}
	wake := s.feed.Wait() // before reading the head, so a later commit closes it
	return s.feed.Step(after, store.Revision(s.head.Load()), wake, func(through store.Revision) ([]store.Change, error) {
		return s.history(ctx, uint64(after), uint64(through))
	})
}

// history rebuilds the non-empty changes of revisions after+1..through from the
// versioned keys and the schema keys.
func (s *Store) history(ctx context.Context, after, through uint64) ([]store.Change, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	// The collector raises oldest before it deletes anything, so checking it after
	// taking the snapshot proves the snapshot holds every version of the range.
	if after < s.oldest.Load() {
		return nil, store.ErrRevisionGone
	}
	h := &historyScan{after: after, through: through, byRev: map[uint64][]store.RelationshipChange{}, schema: map[uint64]bool{}}
	if err := h.scanVersions(ctx, snap); err != nil {
		return nil, err
	}
	if err := h.scanSchemas(snap); err != nil {
		return nil, err
	}
	return changefeed.Assemble(h.byRev, h.schema), nil
}

// historyScan collects the changes of the revisions after+1..through.
type historyScan struct {
	after, through uint64
	byRev          map[uint64][]store.RelationshipChange
	schema         map[uint64]bool
}

func (h *historyScan) in(rev uint64) bool { return rev > h.after && rev <= h.through }

// scanVersions visits every forward version. Versions of one key come newest first,
// so a version ended at the revision that created the one before it was replaced by
// a touch, not deleted.
func (h *historyScan) scanVersions(ctx context.Context, snap *pebble.Snapshot) error {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{tagForward}, UpperBound: []byte{tagForward + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	var prevLogical []byte
	var prevCreated uint64
	for valid := it.First(); valid; valid = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := it.Key()
		fs, created, ok := parseVersioned(k)
		if !ok {
			return errCorrupt
		}
		logical := k[:len(k)-suffixLen]
		replacedAt := uint64(0)
		if bytes.Equal(logical, prevLogical) {
			replacedAt = prevCreated
		}
		prevLogical, prevCreated = append(prevLogical[:0], logical...), created
		if err := h.addVersion(it, &fs, created, replacedAt); err != nil {
			return err
		}
	}
	return it.Error()
}

// addVersion records the touch that created the iterator's version and the delete
// that ended it, for those in range.
func (h *historyScan) addVersion(it *pebble.Iterator, fs *fields, created, replacedAt uint64) error {
	v, err := it.ValueAndErr()
	if err != nil {
		return err
	}
	deleted, body, err := splitValue(v)
	if err != nil {
		return err
	}
	ended := deleted != 0 && h.in(deleted) && deleted != replacedAt
	if !h.in(created) && !ended {
		return nil
	}
	r := relationshipOf(relKey(fs))
	if err := decodeBody(body, &r); err != nil {
		return err
	}
	if h.in(created) {
		h.byRev[created] = append(h.byRev[created], store.RelationshipChange{Op: store.ChangeTouch, Relationship: r})
	}
	if ended {
		h.byRev[deleted] = append(h.byRev[deleted], store.RelationshipChange{Op: store.ChangeDelete, Relationship: r})
	}
	return nil
}

// scanSchemas notes the revisions in range that wrote the schema.
func (h *historyScan) scanSchemas(snap *pebble.Snapshot) error {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: schemaKey(h.through), UpperBound: schemaKey(h.after)})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		if k := it.Key(); len(k) == 9 {
			h.schema[^binary.BigEndian.Uint64(k[1:])] = true
		}
	}
	return it.Error()
}

var _ store.Watcher = (*Store)(nil)
