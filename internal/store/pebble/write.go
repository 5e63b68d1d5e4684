package pebble

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Writes are serialized by writeMu: each checks its preconditions and runs its
// validator against the newest applied revision, builds one Pebble batch and applies
// it, all under the lock; then it leaves the lock and waits for the write-ahead log
// sync. Concurrent writers thus share fsyncs (group commit) while their checks stay
// serial. A revision becomes readable (the head) only after its sync: a write is
// acknowledged and seen only once it is durable. A write that builds on one not yet
// synced is synced after it, since the log is synced in order.

// Write applies updates atomically as one new revision. On any error nothing is
// written.
func (s *Store) Write(ctx context.Context, preconditions []store.Precondition, updates []store.Update, validate store.Validator) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := checkUpdates(updates); err != nil {
		return 0, err
	}
	return s.write(ctx, preconditions, validate, func(_ *reader, t *tx) error {
		for _, u := range updates {
			if err := t.apply(u); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteByFilter deletes the relationships matching f at the head, in key order, at
// most limit of them (0: all). With more matches than limit it deletes nothing and
// fails with ErrTooManyToDelete, unless partial, when it deletes the first limit and
// reports that more remain.
func (s *Store) DeleteByFilter(ctx context.Context, preconditions []store.Precondition, f store.Filter, limit int, partial bool) (store.Revision, int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, false, err
	}
	var deleted int
	var more bool
	rev, err := s.write(ctx, preconditions, nil, func(r *reader, t *tx) error {
		var opts store.QueryOptions
		if limit > 0 {
			opts.Limit = limit + 1
		}
		var keys []rel.Key
		for item, err := range r.Query(ctx, f, opts) {
			if err != nil {
				return err
			}
			keys = append(keys, item.Relationship.Key())
		}
		if limit > 0 && len(keys) > limit {
			if !partial {
				return store.ErrTooManyToDelete
			}
			keys, more = keys[:limit], true
		}
		for _, k := range keys {
			if err := t.apply(store.Update{Op: store.Delete, Relationship: relationshipOf(k)}); err != nil {
				return err
			}
		}
		deleted = len(keys)
		return nil
	})
	if err != nil {
		return 0, 0, false, err
	}
	return rev, deleted, more, nil
}

// WriteSchema stores text as the schema from a new revision on, once validate (which
// may be nil) accepts the state at the head.
func (s *Store) WriteSchema(ctx context.Context, text string, validate store.Validator) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.write(ctx, nil, validate, func(_ *reader, t *tx) error {
		t.schemaChanged = true
		return t.b.Set(schemaKey(t.rev), []byte(text), nil)
	})
}

// write runs one write: checks and build under writeMu, then the sync.
func (s *Store) write(ctx context.Context, preconditions []store.Precondition, validate store.Validator, build func(*reader, *tx) error) (store.Revision, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	rev, err := s.applyWrite(ctx, preconditions, validate, build)
	if err != nil {
		return 0, err
	}
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return 0, fmt.Errorf("pebble store: syncing the write-ahead log: %w", err)
	}
	s.publish(rev)
	s.feed.Notify()
	return store.Revision(rev), nil
}

func (s *Store) applyWrite(ctx context.Context, preconditions []store.Precondition, validate store.Validator, build func(*reader, *tx) error) (uint64, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := &reader{s: s, rev: s.applied}
	if err := store.CheckPreconditions(ctx, r, preconditions); err != nil {
		return 0, err
	}
	if validate != nil {
		if err := validate(ctx, r); err != nil {
			return 0, err
		}
	}
	t := s.newTxLocked()
	defer t.close()
	if err := build(r, t); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	rev, err := t.commitLocked(pebble.NoSync)
	if err == nil {
		s.feed.Append(t.watchChange(), false)
	}
	return rev, err
}

// publish makes rev the head unless a later revision already is (syncs can finish
// in any order; a later revision's sync covers the earlier ones).
func (s *Store) publish(rev uint64) {
	for {
		h := s.head.Load()
		if h >= rev || s.head.CompareAndSwap(h, rev) {
			return
		}
	}
}

// checkUpdates refuses unknown operations, nameless caveats, names with NUL bytes and
// batches that update one relationship twice.
func checkUpdates(updates []store.Update) error {
	if err := store.CheckUpdates(updates); err != nil {
		return err
	}
	for _, u := range updates {
		if err := checkKeyBytes(u); err != nil {
			return err
		}
	}
	return nil
}

func checkUpdate(u store.Update) error {
	if err := store.CheckUpdate(u); err != nil {
		return err
	}
	return checkKeyBytes(u)
}

// checkKeyBytes refuses NUL bytes, which separate the parts of a key.
func checkKeyBytes(u store.Update) error {
	if ks := keyStrings(u.Relationship.Key()); hasNUL(ks[:]...) {
		return &store.InvalidUpdateError{Update: u, Reason: "a type, id or relation contains a NUL byte"}
	}
	return nil
}

func relationshipOf(k rel.Key) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: k.ResourceType, ID: k.ResourceID}, Relation: k.Relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: k.SubjectType, ID: k.SubjectID}, Relation: k.SubjectRelation},
	}
}

// tx builds the batch of one revision over the state at s.applied. It reads the
// database, not its own batch: a batch never touches one relationship twice.
type tx struct {
	s   *Store
	rev uint64
	now int64 // commit time, unix ns
	b   *pebble.Batch
	it  *pebble.Iterator // lazily opened, for current-version lookups
	buf []byte
	// changes and schemaChanged are what the revision did, for watchers.
	changes       []store.RelationshipChange
	schemaChanged bool
}

func (s *Store) newTxLocked() *tx {
	now := max(s.opts.Now().UnixNano(), s.lastCommit) // keep commit times ordered if the clock steps back
	return &tx{s: s, rev: s.applied + 1, now: now, b: s.db.NewBatch()}
}

func (t *tx) close() {
	if t.it != nil {
		_ = t.it.Close()
	}
	_ = t.b.Close()
}

// commitLocked adds the revision's metadata and applies the batch.
func (t *tx) commitLocked(opts *pebble.WriteOptions) (uint64, error) {
	_ = t.b.Set(keyHead, u64(t.rev), nil)
	_ = t.b.Set(commitKey(t.rev), u64(uint64(t.now)), nil)
	if err := t.b.Commit(opts); err != nil {
		return 0, fmt.Errorf("pebble store: committing revision %d: %w", t.rev, err)
	}
	t.s.applied, t.s.lastCommit = t.rev, t.now
	return t.rev, nil
}

// current returns the newest version of k: its creating revision and value.
func (t *tx) current(k rel.Key) (created uint64, value []byte, found bool, err error) {
	if t.it == nil {
		t.it, err = t.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagForward}, UpperBound: []byte{tagForward + 1}})
		if err != nil {
			return 0, nil, false, err
		}
	}
	t.buf = appendForward(t.buf[:0], k)
	if !t.it.SeekPrefixGE(t.buf) {
		return 0, nil, false, t.it.Error()
	}
	key := t.it.Key()
	if !versioned(key) || !bytes.Equal(key[:len(key)-suffixLen], t.buf) {
		return 0, nil, false, errCorrupt
	}
	v, err := t.it.ValueAndErr()
	if err != nil {
		return 0, nil, false, err
	}
	return versionOf(key), bytes.Clone(v), true, nil
}

// apply adds one checked update to the batch.
func (t *tx) apply(u store.Update) error {
	k := u.Relationship.Key()
	created, value, found, err := t.current(k)
	if err != nil {
		return err
	}
	var deleted uint64
	var curBody []byte
	if found {
		if deleted, curBody, err = splitValue(value); err != nil {
			return err
		}
	}
	live := found && deleted == 0
	if u.Op == store.Delete {
		if !live {
			return nil
		}
		if err := t.recordChange(store.ChangeDelete, k, curBody); err != nil {
			return err
		}
		return t.end(k, created, value)
	}
	if u.Op == store.Create && live {
		exp, err := bodyExpiry(curBody)
		if err != nil {
			return err
		}
		if !exp.expiredAt(expiryOf(t.s.opts.Now())) {
			return &store.AlreadyExistsError{Relationship: u.Relationship}
		}
	}
	body, err := encodeBody(&u.Relationship)
	if err != nil {
		return &store.InvalidUpdateError{Update: u, Reason: err.Error()}
	}
	if live {
		if u.Op == store.Touch && bytes.Equal(body, curBody) {
			return nil // nothing would change; keep the version instead of churning it
		}
		if err := t.end(k, created, value); err != nil {
			return err
		}
	}
	t.put(k, &u.Relationship, body)
	return t.recordChange(store.ChangeTouch, k, body)
}

// end marks the version of k created at created as deleted at t.rev.
func (t *tx) end(k rel.Key, created uint64, value []byte) error {
	v, err := endedValue(value, t.rev)
	if err != nil {
		return err
	}
	fwd := appendVersion(appendForward(nil, k), created)
	_ = t.b.Set(fwd, v, nil)
	_ = t.b.Set(appendVersion(appendReverse(nil, k), created), v, nil)
	_ = t.b.Set(endedKey(t.rev, fwd), nil, nil)
	return nil
}

// put writes a new live version of k created at t.rev.
func (t *tx) put(k rel.Key, r *rel.Relationship, body []byte) {
	v := liveValue(body)
	fwd := appendVersion(appendForward(nil, k), t.rev)
	_ = t.b.Set(fwd, v, nil)
	_ = t.b.Set(appendVersion(appendReverse(nil, k), t.rev), v, nil)
	if r.Expiration != nil {
		e := expiryOf(*r.Expiration)
		_ = t.b.Set(expiringKey(e.sec, e.nsec, fwd), nil, nil)
	}
}
