package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/store"
)

// gcChunk bounds the versions removed per batch (and per hold of writeMu), so that
// collecting a day of deletions neither builds a huge batch nor stalls writers. A
// variable so that tests can shrink it.
var gcChunk = 2048

// GCResult reports one collection.
type GCResult struct {
	Horizon       store.Revision // the oldest revision still readable
	Revisions     int            // revisions forgotten
	Relationships int            // relationship versions removed
}

// collectLoop runs GC every GCInterval until Close.
func (s *Store) collectLoop() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(s.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// An error (a closed store, a failing disk) is retried at the next tick;
			// Pebble reports disk errors through its own logger.
			_, _ = s.GC(ctx)
		}
	}
}

// GC forgets the revisions superseded longer than the GC window ago, then removes the
// versions that no retained revision can see: versions ended at or before the new
// oldest revision, and live versions that expired more than the window ago (reads
// hide them already; only a reader asking for expired relationships could tell).
func (s *Store) GC(ctx context.Context) (GCResult, error) {
	var res GCResult
	if err := s.acquire(); err != nil {
		return res, err
	}
	defer s.release()
	now := s.opts.Now().UnixNano()
	cutoff := now - int64(s.opts.GCWindow)
	prev := s.oldest.Load()
	oldest, err := s.advanceOldest(cutoff)
	if err != nil {
		return res, err
	}
	res.Horizon, res.Revisions = store.Revision(oldest), int(oldest-prev)
	n, err := s.collectEnded(ctx, oldest)
	res.Relationships += n
	if err != nil {
		return res, err
	}
	n, err = s.collectExpired(ctx, cutoff)
	res.Relationships += n
	// Iterators opened before the collection, idle or still in use, would show what it
	// removed (long-expired relationships, to readers asking for them); queries from
	// now on get iterators opened after it.
	s.iters.drop()
	if err != nil {
		return res, err
	}
	return res, s.forgetHistory(oldest)
}

// advanceOldest moves the oldest retained revision to the first one that is the head
// or whose successor committed after cutoff, and stores it. It raises s.oldest before
// anything is deleted, so readers of forgotten revisions fail cleanly.
func (s *Store) advanceOldest(cutoff int64) (uint64, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	lo, hi := s.oldest.Load(), s.applied
	// Invariant: revisions below lo are forgotten; hi is retained.
	for lo < hi {
		mid := lo + (hi-lo)/2
		at, err := s.getUint(commitKey(mid + 1))
		if err != nil {
			return 0, err
		}
		if int64(at) > cutoff {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == s.oldest.Load() {
		return lo, nil
	}
	s.oldest.Store(lo)
	if err := s.db.Set(keyOldest, u64(lo), pebble.NoSync); err != nil {
		return 0, fmt.Errorf("pebble store: recording the oldest revision: %w", err)
	}
	return lo, nil
}

// collectEnded removes the versions ended at or before oldest, with their log entries.
func (s *Store) collectEnded(ctx context.Context, oldest uint64) (int, error) {
	upper := binary.BigEndian.AppendUint64([]byte{tagEnded}, oldest+1)
	total := 0
	for {
		n, more, err := s.collectChunk(ctx, []byte{tagEnded}, upper, func(b *pebble.Batch, k []byte) (bool, error) {
			if len(k) < 9 {
				return false, errCorrupt
			}
			return true, deleteVersion(b, k[9:])
		})
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// collectExpired removes live versions that expired at or before cutoff. A version
// ended meanwhile is left to collectEnded.
func (s *Store) collectExpired(ctx context.Context, cutoff int64) (int, error) {
	c := time.Unix(0, cutoff).Add(time.Nanosecond)
	upper := expiringKey(c.Unix(), uint32(c.Nanosecond()), nil)
	total := 0
	for {
		n, more, err := s.collectChunk(ctx, []byte{tagExpiring}, upper, func(b *pebble.Batch, k []byte) (bool, error) {
			if len(k) < 13 {
				return false, errCorrupt
			}
			fwd := k[13:]
			v, ok, err := s.get(fwd)
			if err != nil || !ok {
				return false, err
			}
			if deleted, _, err := splitValue(v); err != nil || deleted != 0 {
				return false, err
			}
			return true, deleteVersion(b, fwd)
		})
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// collectChunk deletes up to gcChunk log entries in [lower, upper), calling visit for
// each to add the deletion of the version it names (visit reports whether it did).
// It returns the versions removed and whether entries remain.
func (s *Store) collectChunk(ctx context.Context, lower, upper []byte, visit func(*pebble.Batch, []byte) (bool, error)) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()
	n, entries := 0, 0
	valid := it.First()
	for ; valid && entries < gcChunk; valid = it.Next() {
		k := bytes.Clone(it.Key())
		removed, err := visit(b, k)
		if err != nil {
			return 0, false, err
		}
		if removed {
			n++
		}
		entries++
		_ = b.Delete(k, nil)
	}
	if err := it.Error(); err != nil {
		return 0, false, err
	}
	if entries == 0 {
		return 0, false, nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, false, fmt.Errorf("pebble store: collecting garbage: %w", err)
	}
	return n, valid, nil
}

// deleteVersion adds the deletion of a version (forward key fwd) and its reverse key.
func deleteVersion(b *pebble.Batch, fwd []byte) error {
	fs, created, ok := parseVersioned(fwd)
	if !ok || fwd[0] != tagForward {
		return errCorrupt
	}
	_ = b.Delete(fwd, nil)
	_ = b.Delete(reverseFromFields(nil, &fs, created), nil)
	return nil
}

// forgetHistory drops the commit times of forgotten revisions and the schema versions
// no retained revision reads.
func (s *Store) forgetHistory(oldest uint64) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange([]byte{tagCommit}, commitKey(oldest), nil)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagSchema}, UpperBound: []byte{tagSchema + 1}})
	if err != nil {
		return err
	}
	if it.SeekGE(schemaKey(oldest)) {
		// The schema in force at oldest stays; the ones it replaced go.
		_ = b.DeleteRange(append(bytes.Clone(it.Key()), 0), []byte{tagSchema + 1}, nil)
	}
	if err := it.Close(); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("pebble store: collecting garbage: %w", err)
	}
	return nil
}
