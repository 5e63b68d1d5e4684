package pebble

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/store"
)

// Relationship counters live at keys of their own (counterKey), outside the versioned
// keyspaces: a registration makes no revision and is read at none. Each change is one
// key written with a synced log, so it is durable once acknowledged, as writes are.

// RegisterCounter registers f under name (store.Counters).
func (s *Store) RegisterCounter(ctx context.Context, name string, f store.Filter) error {
	raw, err := store.EncodeCounterFilter(f)
	if err != nil {
		return err
	}
	return s.changeCounter(ctx, name, func(b *pebble.Batch, k []byte, exists bool) error {
		if exists {
			return store.ErrCounterExists
		}
		return b.Set(k, raw, nil)
	})
}

// UnregisterCounter removes the counter named name (store.Counters).
func (s *Store) UnregisterCounter(ctx context.Context, name string) error {
	return s.changeCounter(ctx, name, func(b *pebble.Batch, k []byte, exists bool) error {
		if !exists {
			return store.ErrCounterUnknown
		}
		return b.Delete(k, nil)
	})
}

// changeCounter looks up name's key and commits what change adds to a batch, under
// counterMu so that the key is not changed between the two.
func (s *Store) changeCounter(ctx context.Context, name string, change func(b *pebble.Batch, k []byte, exists bool) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	s.counterMu.Lock()
	defer s.counterMu.Unlock()
	k := counterKey(name)
	_, exists, err := s.get(k)
	if err != nil {
		return fmt.Errorf("pebble store: reading relationship counter %q: %w", name, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := change(b, k, exists); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pebble store: writing relationship counter %q: %w", name, err)
	}
	return nil
}

// CounterFilter returns the filter registered under name (store.Counters).
func (s *Store) CounterFilter(ctx context.Context, name string) (store.Filter, error) {
	if err := ctx.Err(); err != nil {
		return store.Filter{}, err
	}
	if err := s.acquire(); err != nil {
		return store.Filter{}, err
	}
	defer s.release()
	raw, ok, err := s.get(counterKey(name))
	switch {
	case err != nil:
		return store.Filter{}, fmt.Errorf("pebble store: reading relationship counter %q: %w", name, err)
	case !ok:
		return store.Filter{}, store.ErrCounterUnknown
	}
	return store.DecodeCounterFilter(raw)
}
