package memory

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Write applies updates atomically as one new revision. Everything that can fail is
// checked before the first change, against the head the write starts from (writers are
// serialized), so a failed write leaves no trace.
func (s *Store) Write(ctx context.Context, preconditions []store.Precondition, updates []store.Update, validate store.Validator) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := store.CheckUpdates(updates); err != nil {
		return 0, err
	}
	if _, err := s.checkedHead(ctx, preconditions, validate); err != nil {
		return 0, err
	}
	if err := s.checkCreates(updates); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rev, err := s.commitLocked()
	if err != nil {
		return 0, err
	}
	var changes []store.RelationshipChange
	for _, u := range updates {
		if c, ok := s.applyLocked(u, rev); ok {
			changes = append(changes, c)
		}
	}
	s.publishLocked(rev, changes, false)
	return store.Revision(rev), nil
}

// headReader returns a reader at the head, or errClosed. Callers hold writeMu, so the
// head cannot move until they commit.
func (s *Store) headReader() (*reader, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed
	}
	return &reader{s: s, rev: s.head}, nil
}

// checkedHead returns a reader at the head once the write's preconditions hold there
// and its validator (nil: none) accepts it. Callers hold writeMu.
func (s *Store) checkedHead(ctx context.Context, preconditions []store.Precondition, validate store.Validator) (*reader, error) {
	r, err := s.headReader()
	if err != nil {
		return nil, err
	}
	if err := store.CheckPreconditions(ctx, r, preconditions); err != nil {
		return nil, err
	}
	if validate != nil {
		if err := validate(ctx, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkCreates fails when a CREATE names a relationship that exists and has not
// expired (an expired relationship reads as absent, so creating it again succeeds).
func (s *Store) checkCreates(updates []store.Update) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := s.checkRoomLocked(len(updates), func(yield func(rel.Relationship) bool) {
		for _, u := range updates {
			if u.Op != store.Delete && !yield(u.Relationship) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	now := s.opts.Now().UnixNano()
	for _, u := range updates {
		if u.Op != store.Create {
			continue
		}
		if idx := s.currentLocked(u.Relationship.Key()); idx != 0 && !s.expiredAtLocked(idx, s.recs.at(idx), now) {
			return &store.AlreadyExistsError{Relationship: u.Relationship}
		}
	}
	return nil
}

// checkRoomLocked fails when n more record versions, which write the relationships
// rels yields, would not fit: there are at most 4 billion records, and the name slots
// left (see recordPages.name) must hold the new types and relations they name.
func (s *Store) checkRoomLocked(n int, rels iter.Seq[rel.Relationship]) error {
	if uint64(s.recs.len())+uint64(n) >= math.MaxUint32 {
		return errors.New("the memory store cannot hold more than 4 billion relationship versions")
	}
	left := maxNames - s.recs.namesInUse()
	if left >= 4*n {
		return nil // even all new, they fit
	}
	fresh := map[string]bool{}
	for r := range rels {
		for _, name := range [...]string{r.Resource.Type, r.Relation, r.Subject.Object.Type, r.Subject.Relation} {
			if sy, ok := s.in.lookup(name); ok {
				if _, ok := s.recs.slotOf[sy]; ok {
					continue
				}
			}
			fresh[name] = true
		}
	}
	if len(fresh) > left {
		return fmt.Errorf("the memory store holds at most %d distinct type and relation names; this write adds %d to %d", maxNames, len(fresh), s.recs.namesInUse())
	}
	return nil
}

// applyLocked applies one checked update at rev and returns the change it made, for
// watchers (ok is false when it changed nothing).
func (s *Store) applyLocked(u store.Update, rev uint64) (c store.RelationshipChange, ok bool) {
	cur := s.currentLocked(u.Relationship.Key())
	if u.Op == store.Delete {
		if cur == 0 {
			return c, false
		}
		c = store.RelationshipChange{Op: store.ChangeDelete, Relationship: s.materializeLocked(cur)}
		s.endLocked(cur, rev)
		return c, true
	}
	if cur != 0 {
		if u.Op == store.Touch && s.sameLocked(cur, u.Relationship) {
			return c, false // nothing would change; keep the record instead of churning it
		}
		s.endLocked(cur, rev)
	}
	idx := s.insertLocked(u.Relationship, rev)
	return store.RelationshipChange{Op: store.ChangeTouch, Relationship: s.materializeLocked(idx)}, true
}

// sameLocked reports whether record idx already stores x's caveat and expiration.
func (s *Store) sameLocked(idx uint32, x rel.Relationship) bool {
	return s.side.same(idx, x.Caveat, encodeExpiration(x.Expiration))
}

// DeleteByFilter deletes the relationships matching f at the head, in key order, at
// most limit of them (0: all). With more matches than limit it deletes nothing and
// fails with ErrTooManyToDelete, unless partial, when it deletes the first limit and
// reports that more remain.
func (s *Store) DeleteByFilter(ctx context.Context, preconditions []store.Precondition, f store.Filter, limit int, partial bool) (store.Revision, int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, false, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r, err := s.checkedHead(ctx, preconditions, nil)
	if err != nil {
		return 0, 0, false, err
	}
	var opts store.QueryOptions
	if limit > 0 {
		opts.Limit = limit + 1
	}
	var keys []rel.Key
	for item, err := range r.Query(ctx, f, opts) {
		if err != nil {
			return 0, 0, false, err
		}
		keys = append(keys, item.Relationship.Key())
	}
	more := false
	if limit > 0 && len(keys) > limit {
		if !partial {
			return 0, 0, false, store.ErrTooManyToDelete
		}
		keys, more = keys[:limit], true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rev, err := s.commitLocked()
	if err != nil {
		return 0, 0, false, err
	}
	changes := make([]store.RelationshipChange, 0, len(keys))
	for _, k := range keys {
		if cur := s.currentLocked(k); cur != 0 {
			changes = append(changes, store.RelationshipChange{Op: store.ChangeDelete, Relationship: s.materializeLocked(cur)})
			s.endLocked(cur, rev)
		}
	}
	s.publishLocked(rev, changes, false)
	return store.Revision(rev), len(keys), more, nil
}

// WriteSchema stores text as the schema from a new revision on, once validate (which
// may be nil) accepts the state at the head.
func (s *Store) WriteSchema(ctx context.Context, text string, validate store.Validator) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.checkedHead(ctx, nil, validate); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rev, err := s.commitLocked()
	if err != nil {
		return 0, err
	}
	s.schemas = append(s.schemas, schemaVersion{rev: rev, text: text})
	s.publishLocked(rev, nil, true)
	return store.Revision(rev), nil
}
